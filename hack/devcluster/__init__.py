"""A local Kubernetes control plane for integration tests and development (docs/local-cluster.md).

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok run as local processes on
loopback, from binaries built out of Go modules by hack/build/build-testbin.sh.
"""

from .cluster import LocalCluster
from .nodes import NodePool
from .wait import HarnessError, WaitTimeoutError, wait_for

__all__ = ["HarnessError", "LocalCluster", "NodePool", "WaitTimeoutError", "wait_for"]
