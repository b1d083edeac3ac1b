"""The peer benchmark (hack/bench_peer.py): the upstream Go mpi-operator and ours, side by side."""
