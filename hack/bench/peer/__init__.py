"""The peer benchmark (hack/bench/peer/__main__.py): the upstream Go mpi-operator and ours, side by side."""
