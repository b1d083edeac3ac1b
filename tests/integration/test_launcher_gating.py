# ruff: noqa: F811  (test_kueue's fixtures, imported here, are the tests' parameters)
"""Launcher gating (docs/proposals/launcher-gating.md) against the real control plane and the real Kueue, and
the endpoints controller (a launcher waits for its workers' names).

Workers are held back by a scheduling gate of the test's own in their template: a gated pod is never scheduled,
so kwok never makes it Ready; the test removes the gate from one pod at a time and kwok's pod-ready stage makes
it Running and Ready at once. The launcher Job must stay suspended, with no pod and no ``status.startTime``,
until the last worker's gate is gone, and is then released exactly once (one Update of the Job, from the
API server's audit log). Kueue: one Workload with two PodSets for the MPIJob, none for the launcher Job.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.audit import audit_events
from hack.devcluster.kueue import Kueue
from hack.devcluster.mpijobs import mpijob
from tests.integration.mpijobs import Jobs, history, until
from tests.integration.operator_fixtures import ReconcilerControl
from tests.integration.test_kueue import (  # noqa: F401  (fixtures)
    JOB_CPU,
    KUEUE,
    POOL,
    POOL_LABEL,
    Queues,
    flavor_nodes,
    jobs,
    kueue,
    launcher_pods,
    queued_job,
    queues,
    running_launcher,
    wait_workload,
)

JSON = dict[str, Any]
HOLD = {"name": "test.mpijob/hold"}  # the test's scheduling gate on the workers


def gated(job: JSON, policy: str = "WaitForWorkersReady") -> JSON:
    """``job`` with the launcherCreationPolicy and the workers held by the test's scheduling gate."""
    job["spec"]["launcherCreationPolicy"] = policy
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["schedulingGates"] = [dict(HOLD)]
    return job


def plain_job(name: str, policy: str = "WaitForWorkersReady") -> JSON:
    """A job of one launcher and two held workers, on the cluster's own kwok nodes (no Kueue)."""
    job = queued_job(name, "")
    del job["metadata"]["labels"]
    return gated(job, policy)


def release(jobs: Jobs, pod: str) -> float:
    """Remove the hold from the worker ``pod`` and wait until it is Running and Ready; when it was removed."""
    at = time.time()
    jobs.cluster.rest.merge_patch(jobs.path("pods", pod), {"spec": {"schedulingGates": None}})

    def ready() -> bool:
        status = jobs.must("pods", pod).get("status") or {}
        return status.get("phase") == "Running" and any(
            c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])

    until(ready, timeout=60, what=f"{pod} Ready")
    return at


def running_condition(jobs: Jobs, job: str) -> tuple[str, str, str] | None:
    cond = jobs.condition(job, "Running")
    return (cond["status"], cond["reason"], cond["message"]) if cond else None


def wait_running_condition(jobs: Jobs, job: str, expected: tuple[str, str, str]) -> None:
    until(lambda: running_condition(jobs, job) == expected, timeout=60, what=f"{job} Running={expected}")


def assert_held(jobs: Jobs, job: str) -> None:
    """The launcher Job exists, suspended, and has never started: no pod, no startTime."""
    launcher = jobs.wait_launcher(job)
    assert launcher["spec"]["suspend"] is True
    assert "startTime" not in (launcher.get("status") or {})
    assert launcher_pods(jobs, job) == []


def waiting(jobs: Jobs, job: str, ready: int) -> tuple[str, str, str]:
    return "False", "WaitingForWorkers", f"MPIJob {jobs.ns}/{job} waits for its workers: {ready}/2 workers ready"


def launcher_updates(cluster: LocalCluster, namespace: str, job: str, offset: int = 0) -> int:
    """Successful Updates of the launcher Job (not its status) in the audit log from ``offset``: releases."""
    assert cluster.audit_log is not None
    count = 0
    for event in audit_events(cluster.audit_log, offset=offset):
        ref = event.get("objectRef") or {}
        if (event.get("verb"), ref.get("resource"), ref.get("subresource"), ref.get("namespace"), ref.get("name"),
                event.get("stage")) == ("update", "jobs", None, namespace, f"{job}-launcher", "ResponseComplete") \
                and event["responseStatus"]["code"] < 300:
            count += 1
    return count


def started_at(launcher: JSON) -> float:
    return datetime.fromisoformat(launcher["status"]["startTime"]).timestamp()


def test_a_kueue_job_keeps_its_launcher_suspended_until_every_worker_is_ready(
        jobs: Jobs, queues: Queues, kueue: Kueue, flavor_nodes: list[str]) -> None:
    queue = queues.queue(cpu=JOB_CPU)
    created = jobs.create(gated(queued_job("gated", queue)))
    assert created["spec"]["runPolicy"]["suspend"] is True  # Kueue's webhook
    workload = wait_workload(queues, jobs, "gated", "Admitted")
    workers = [p["metadata"]["name"] for p in jobs.wait_workers("gated", 2)]
    assert jobs.get("gated")["spec"]["runPolicy"].get("suspend") is False
    wait_running_condition(jobs, "gated", waiting(jobs, "gated", 0))
    assert_held(jobs, "gated")

    release(jobs, workers[0])
    wait_running_condition(jobs, "gated", waiting(jobs, "gated", 1))  # the count rides on the Worker count's write
    assert_held(jobs, "gated")

    last = release(jobs, workers[1])
    launcher = jobs.wait_launcher("gated", suspended=False)
    assert launcher["spec"]["template"]["spec"]["nodeSelector"] == {POOL_LABEL: POOL}, "directives synced first"
    running_launcher(jobs, "gated")
    jobs.wait_condition("gated", "Running")
    launcher = jobs.wait_launcher("gated")
    assert started_at(launcher) >= int(last), "the launcher Job started only after the last worker was let go"
    assert launcher_updates(jobs.cluster, jobs.ns, "gated") == 1, "released once"

    # Kueue's accounting is unchanged: one Workload (the MPIJob's), two PodSets, none for the launcher Job
    workloads = jobs.cluster.rest.get(f"/apis/{KUEUE}/namespaces/{jobs.ns}/workloads")["items"]
    assert [w["metadata"]["name"] for w in workloads] == [workload["metadata"]["name"]]
    assert [(ref["kind"], ref["name"]) for ref in workloads[0]["metadata"]["ownerReferences"]] == [
        ("MPIJob", "gated")]
    assert [(p["name"], p["count"]) for p in workloads[0]["spec"]["podSets"]] == [("launcher", 1), ("worker", 2)]
    pods_ready = wait_workload(queues, jobs, "gated", "PodsReady")
    assert [(c["status"], c["reason"]) for c in pods_ready["status"]["conditions"] if c["type"] == "PodsReady"] == [
        ("True", "Started")]


def test_a_resumed_job_is_gated_again(cluster: LocalCluster, reconciler: ReconcilerControl, namespace: str) -> None:
    jobs = Jobs(cluster, namespace)
    jobs.create(plain_job("again"))
    for pod in [p["metadata"]["name"] for p in jobs.wait_workers("again", 2)]:
        release(jobs, pod)
    running_launcher(jobs, "again")
    jobs.wait_condition("again", "Running")

    jobs.patch("again", {"spec": {"runPolicy": {"suspend": True}}})
    jobs.wait_condition("again", "Suspended")
    jobs.wait_launcher("again", suspended=True)
    until(lambda: launcher_pods(jobs, "again") == [] and jobs.workers("again") == [], timeout=60,
          what="the launcher pod and the workers gone")
    assert cluster.audit_log is not None
    offset = cluster.audit_log.stat().st_size

    jobs.patch("again", {"spec": {"runPolicy": {"suspend": False}}})
    workers = [p["metadata"]["name"] for p in jobs.wait_workers("again", 2)]
    wait_running_condition(jobs, "again", waiting(jobs, "again", 0))
    release(jobs, workers[0])
    wait_running_condition(jobs, "again", waiting(jobs, "again", 1))
    launcher = jobs.wait_launcher("again")
    assert (launcher["spec"]["suspend"], launcher_pods(jobs, "again")) == (True, []), "held after the resume"
    assert launcher_updates(cluster, namespace, "again", offset) == 0

    release(jobs, workers[1])
    jobs.wait_launcher("again", suspended=False)
    running_launcher(jobs, "again")
    jobs.wait_condition("again", "Running")
    assert launcher_updates(cluster, namespace, "again", offset) == 1


def test_at_startup_releases_the_launcher_with_the_workers_as_upstream(
        cluster: LocalCluster, reconciler: ReconcilerControl, namespace: str) -> None:
    jobs = Jobs(cluster, namespace)
    job = plain_job("eager", "AtStartup")
    job["spec"]["runPolicy"]["suspend"] = True
    jobs.create(job)
    jobs.wait_condition("eager", "Suspended")
    jobs.wait_launcher("eager", suspended=True)
    jobs.patch("eager", {"spec": {"runPolicy": {"suspend": False}}})
    jobs.wait_launcher("eager", suspended=False)
    running_launcher(jobs, "eager")
    held = jobs.workers("eager")
    assert [(p["spec"].get("schedulingGates"), p["status"].get("phase")) for p in held] == [
        ([HOLD], "Pending"), ([HOLD], "Pending")], "the launcher runs while no worker is Ready"
    assert running_condition(jobs, "eager") == ("False", "MPIJobSuspended", f"MPIJob {namespace}/eager is suspended.")


def published(slices: dict[str, JSON], workers: dict[str, str]) -> bool:
    """Whether each worker (name: UID) is a ready endpoint with a hostname: its DNS name resolves."""
    found = {(e.get("targetRef") or {}).get("uid") for piece in slices.values() for e in piece.get("endpoints") or []
             if e.get("hostname") and (e.get("conditions") or {}).get("ready") is not False}
    return set(workers.values()) <= found


@pytest.fixture
def unmanaged_node(cluster: LocalCluster) -> Iterator[str]:
    """A Node no kwok manages (and no scheduler picks: it is tainted), so that the test alone writes the status of
    the pods bound to it; deleted afterwards."""
    name = f"unmanaged-{uuid.uuid4().hex[:6]}"
    taint = {"key": "test.mpijob/unmanaged", "effect": "NoSchedule"}
    cluster.rest.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                          "spec": {"taints": [taint]}})
    try:
        yield name
    finally:
        cluster.rest.request("DELETE", f"/api/v1/nodes/{name}")


def set_pod_status(jobs: Jobs, pod: str, status: JSON) -> None:
    jobs.cluster.rest.request("PATCH", jobs.path("pods", pod) + "/status", {"status": status},
                              content_type="application/merge-patch+json")


def test_the_launcher_is_created_only_once_every_worker_is_in_the_services_endpoint_slices(
        cluster: LocalCluster, reconciler: ReconcilerControl, namespace: str, unmanaged_node: str) -> None:
    """CoreDNS answers ``<worker>.<job>`` from the Service's EndpointSlices, and caches an early NXDOMAIN: Ready
    alone is not enough. The workers are made Running and Ready without an address (as a pod's status may show
    before the endpoints controller has caught up): the launcher waits, saying why; once they have addresses, the
    endpoints controller publishes them and the launcher Job is created after that write (in etcd's order)."""
    jobs = Jobs(cluster, namespace)
    job = mpijob("dns", 2, launcherCreationPolicy="WaitForWorkersReady")
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["nodeName"] = unmanaged_node
    slices_path = jobs.path("endpointslices", group="discovery.k8s.io/v1")
    since = cluster.rest.get(slices_path)["metadata"]["resourceVersion"]
    jobs.create(job)
    pods = [p["metadata"]["name"] for p in jobs.wait_workers("dns", 2)]
    for pod in pods:
        set_pod_status(jobs, pod, {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
    wait_running_condition(jobs, "dns", ("False", "WaitingForWorkers", f"MPIJob {namespace}/dns waits for its "
                                         "workers: 2/2 workers ready, waiting for their names to resolve"))
    assert jobs.launcher("dns") is None
    for index, pod in enumerate(pods):
        address = f"10.254.0.{index + 1}"
        set_pod_status(jobs, pod, {"podIP": address, "podIPs": [{"ip": address}]})
    jobs.wait_launcher("dns", suspended=False)
    workers = {p["metadata"]["name"]: p["metadata"]["uid"] for p in jobs.workers("dns")}
    seen: dict[str, JSON] = {}
    published_at = None
    for version, piece in history(cluster, slices_path, since):
        seen[piece["metadata"]["name"]] = piece
        if published(seen, workers):
            published_at = version
            break
    created = [version for version, obj in history(cluster, jobs.path("jobs", group="batch/v1"), since)
               if obj["metadata"]["name"] == "dns-launcher"]
    assert published_at is not None, "both workers published"
    assert created, "the launcher Job's versions"
    assert created[0] > published_at, (created, published_at)
