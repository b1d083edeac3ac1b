"""Builds of the binaries and images the local cluster, the real node and the benchmarks run (shell scripts)."""
