"""Benchmarks (docs/benchmarks.md) and their machine-written results (results/)."""
