"""MPIJobs on the local cluster, for the tests, the benchmarks and the demo: a minimal job to create, and
reading one back, its conditions and its launcher's log, waiting until it finishes."""

from __future__ import annotations

from typing import Any

from .cluster import LocalCluster
from .rest import ApiError
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


def idle_mpijob(name: str, api_version: str = "kubeflow.org/v2beta1", run_policy: JSON | None = None) -> JSON:
    """An MPIJob no operator acts on (managed by MultiKueue) and that runs nothing (suspended): what the API server,
    the garbage collector and the namespace controller do with MPIJobs, alone."""
    policy = {"suspend": True, "managedBy": "kueue.x-k8s.io/multikueue", **(run_policy or {})}
    return {"apiVersion": api_version, "kind": "MPIJob", "metadata": {"name": name}, "spec": {
        "runPolicy": policy,
        "mpiReplicaSpecs": {"Launcher": {"template": {"spec": {"containers": [dict(CONTAINER)]}}},
                            "Worker": {"replicas": 1, "template": {"spec": {"containers": [dict(CONTAINER)]}}}}}}


def create_owning_a_config_map(cluster: LocalCluster, namespace: str, name: str) -> JSON:
    """An idle v2beta1 MPIJob and a ConfigMap ``<name>-config`` it owns as its controller (as the reconciler's children
    are, blocking the job's foreground deletion until the garbage collector deletes it); the created job."""
    created = cluster.rest.create(MPIJOBS.format(ns=namespace), idle_mpijob(name))
    owner = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": name,
             "uid": created["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    cluster.rest.create(f"/api/v1/namespaces/{namespace}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-config", "ownerReferences": [owner]},
        "data": {"hostfile": ""}})
    return created


def is_gone(cluster: LocalCluster, path: str) -> bool:
    """Whether the object at ``path`` is gone (404)."""
    try:
        cluster.rest.get(path)
    except ApiError as err:
        if err.status == 404:
            return True
        raise
    return False
