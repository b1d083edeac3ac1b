"""Fake nodes: Node objects that kwok manages, and the wait until the scheduler may use them."""

from __future__ import annotations

from dataclasses import dataclass

from .rest import JSON, ApiError, RestClient, condition

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_LABEL = "nvidia.com/gpu.present"


@dataclass(frozen=True)
class NodePool:
    """How many fake nodes to create and what each offers. The first `gpu_nodes` nodes (all of them
    when None) get `gpus_per_node` GPUs, when that is positive."""

    count: int = 3
    cpu: str = "32"
    memory: str = "256Gi"
    pods: str = "110"
    gpus_per_node: int = 0
    gpu_nodes: int | None = None
    name_prefix: str = "kwok-node-"

    def names(self) -> list[str]:
        return [f"{self.name_prefix}{i}" for i in range(self.count)]

    def has_gpus(self, index: int) -> bool:
        limit = self.count if self.gpu_nodes is None else self.gpu_nodes
        return self.gpus_per_node > 0 and index < limit


def build_node(pool: NodePool, index: int) -> JSON:
    """The Node object for fake node `index`: annotated for kwok, capacity preset, a distinct InternalIP."""
    name = f"{pool.name_prefix}{index}"
    resources = {"cpu": pool.cpu, "memory": pool.memory, "pods": pool.pods}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "type": "kwok"}
    if pool.has_gpus(index):
        resources[GPU_RESOURCE] = str(pool.gpus_per_node)
        labels[GPU_LABEL] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {},
        "status": {
            "allocatable": dict(resources),
            "capacity": dict(resources),
            "addresses": [{"type": "InternalIP", "address": f"10.240.{index // 250}.{index % 250 + 1}"},
                          {"type": "Hostname", "address": name}],
        },
    }


def create_nodes(rest: RestClient, pool: NodePool) -> list[str]:
    """Create the pool's nodes (existing ones are left as they are) and return their names."""
    for i in range(pool.count):
        try:
            rest.create("/api/v1/nodes", build_node(pool, i))
        except ApiError as err:
            if err.status != 409:
                raise
    return pool.names()


def is_schedulable(node: JSON) -> bool:
    """Ready=True, not cordoned, and the not-ready taint (added to every new Node) removed."""
    taints = node.get("spec", {}).get("taints") or []
    return (condition(node, "Ready") == "True" and not node.get("spec", {}).get("unschedulable")
            and not any(t.get("key") == NOT_READY_TAINT for t in taints))


def unready_nodes(rest: RestClient, names: list[str]) -> list[str]:
    """The subset of `names` that is not yet schedulable."""
    items = rest.get("/api/v1/nodes").get("items", [])
    ready = {n["metadata"]["name"] for n in items if is_schedulable(n)}
    return [name for name in names if name not in ready]
