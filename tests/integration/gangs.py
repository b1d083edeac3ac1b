"""Helpers of the gang-scheduling tests: kwok nodes of their own, jobs confined to them, and what the
scheduler did with each job's pods."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.nodes import NodePool, build_node, is_schedulable
from hack.devcluster.rest import ApiError
from hack.devcluster.wait import wait_for
from tests.integration.mpijobs import Jobs

JSON = dict[str, Any]
POOL_LABEL = "gang-test/pool"
JOB_LABEL = "training.kubeflow.org/job-name"


def pool_taint(pool: str) -> JSON:
    return {"key": POOL_LABEL, "value": pool, "effect": "NoSchedule"}


@contextmanager
def gang_nodes(cluster: LocalCluster, pool: str) -> Iterator[NodeGroup]:
    """Nodes only this test's jobs use (labelled and tainted with ``pool``), all deleted afterwards."""
    group = NodeGroup(cluster, pool)
    try:
        yield group
    finally:
        group.delete_all()


class NodeGroup:
    """The kwok nodes of one test: added one by one, each with ``cpu`` CPUs."""

    def __init__(self, cluster: LocalCluster, pool: str) -> None:
        self.cluster, self.pool = cluster, pool
        self.names: list[str] = []

    def add(self, cpu: str) -> str:
        spec = NodePool(count=len(self.names) + 1, cpu=cpu, memory="64Gi", name_prefix=f"{self.pool}-")
        node = build_node(spec, len(self.names))
        node["metadata"]["labels"][POOL_LABEL] = self.pool
        node["spec"]["taints"] = [pool_taint(self.pool)]
        self.cluster.rest.create("/api/v1/nodes", node)
        name: str = node["metadata"]["name"]
        self.names.append(name)
        wait_for(lambda: _schedulable(self.cluster, name), timeout=60, what=f"node {name} Ready")
        return name

    def delete_all(self) -> None:
        for name in self.names:
            try:
                self.cluster.rest.request("DELETE", f"/api/v1/nodes/{name}")
            except ApiError as error:
                if error.status != 404:
                    raise


def _schedulable(cluster: LocalCluster, name: str) -> bool:
    return is_schedulable(cluster.rest.get(f"/api/v1/nodes/{name}"))


def pool_job(name: str, pool: str, workers: int, *, cpu: str = "1", run_for: str = "500ms",
             launcher_labels: dict[str, str] | None = None, **spec: Any) -> JSON:
    """An MPIJob whose pods each request ``cpu`` CPUs and run only on the nodes of ``pool``."""
    job = mpijob(name, workers, launcher_labels=launcher_labels,
                 launcher_annotations={"test.mpijob/run-for": run_for}, **spec)
    for replica in job["spec"]["mpiReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        pod["nodeSelector"] = {POOL_LABEL: pool}
        pod["tolerations"] = [{**pool_taint(pool), "operator": "Equal"}]
        pod["containers"] = [dict(copy.deepcopy(c), resources={"requests": {"cpu": cpu}})
                             for c in pod["containers"]]
    return job


def live_pods(jobs: Jobs, job: str) -> list[JSON]:
    """The job's pods (workers and launcher) that exist and have not finished."""
    return [p for p in jobs.pods(f"{JOB_LABEL}={job}")
            if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]


def bound(pods: list[JSON]) -> list[str]:
    """The names of the pods bound to a node."""
    return sorted(p["metadata"]["name"] for p in pods if (p.get("spec") or {}).get("nodeName"))


def refused(pod: JSON) -> str | None:
    """The scheduler's message when it reported the pod unschedulable (PodScheduled=False), else None."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("message") or "")
    return None
