"""MPIJobs on the local cluster, for the tests, the benchmarks and the demo: a minimal job to create, and
reading one back, its conditions and its launcher's log, waiting until it finishes."""

from __future__ import annotations

from typing import Any

from .cluster import LocalCluster
from .wait import HarnessError, wait_for

JSON = dict[str, Any]
CPU_LIMIT = "500m"  # upstream asks 1 CPU per pod: 3 pods do not fit the real node's 2 CPUs
MPIJOBS = "/apis/kubeflow.org/v2beta1/namespaces/{ns}/mpijobs"
CONTAINER = {"name": "main", "image": "mpi-image"}


def mpijob(name: str, workers: int = 2, *, launcher_labels: dict[str, str] | None = None,
           launcher_annotations: dict[str, str] | None = None, **spec: Any) -> JSON:
    launcher: JSON = {"template": {"spec": {"containers": [dict(CONTAINER)]}}}
    if launcher_labels or launcher_annotations:
        launcher["template"]["metadata"] = {"labels": launcher_labels or {},
                                            "annotations": launcher_annotations or {}}
    replica_specs: JSON = {"Launcher": launcher}
    if workers:
        replica_specs["Worker"] = {"replicas": workers, "template": {"spec": {"containers": [dict(CONTAINER)]}}}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name},
            "spec": {"slotsPerWorker": 1, "runPolicy": {"cleanPodPolicy": "Running"},
                     "mpiReplicaSpecs": replica_specs, **spec}}


def get_job(cluster: LocalCluster, namespace: str, name: str) -> JSON:
    return cluster.rest.get(f"{MPIJOBS.format(ns=namespace)}/{name}")


def conditions(job: JSON) -> dict[str, JSON]:
    return {c["type"]: c for c in (job.get("status") or {}).get("conditions") or []}


def diagnostics(cluster: LocalCluster, namespace: str) -> str:
    pods = cluster.kubectl("get", "pods", "-n", namespace, "-o", "wide").stdout
    events = cluster.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp").stdout
    logs = cluster.kubectl("logs", "-n", namespace, "-l", "training.kubeflow.org/job-role=launcher",
                           "--tail=40", "--prefix").stdout
    return f"pods:\n{pods}\nevents:\n{events[-4000:]}\nlauncher logs:\n{logs}"


def wait_finished(cluster: LocalCluster, namespace: str, name: str, timeout: float = 240) -> tuple[str, JSON]:
    """Until the job has Succeeded or Failed; returns ("Succeeded"|"Failed", the job)."""
    seen: dict[str, Any] = {}

    def finished() -> bool:
        job = get_job(cluster, namespace, name)
        seen["job"] = job
        conds = conditions(job)
        return any(conds.get(t, {}).get("status") == "True" for t in ("Succeeded", "Failed"))

    try:
        wait_for(finished, timeout, 0.5, what=f"MPIJob {namespace}/{name} to finish")
    except HarnessError as err:
        raise HarnessError(f"{err}\n{diagnostics(cluster, namespace)}") from None
    job = seen["job"]
    outcome = "Succeeded" if conditions(job).get("Succeeded", {}).get("status") == "True" else "Failed"
    return outcome, job


def launcher_log(cluster: LocalCluster, namespace: str, name: str) -> str:
    return cluster.kubectl("logs", "-n", namespace, f"job/{name}-launcher", "--tail=-1").stdout
