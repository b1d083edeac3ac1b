"""Why a job is not starting (issue 10): the WorkersReady condition, its one event per cause and the Ready
column, on the real scheduler (kwok nodes) and the real quota admission."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import JSON, mpijob
from hack.devcluster.nodes import NodePool, build_node, unready_nodes
from hack.devcluster.wait import wait_for
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl

HANG = {"test.mpijob/outcome": "hang"}
GPUS_PER_WORKER = 16  # more than any node of the session's cluster has (the first has 8)
WAITS = " (the launcher waits for every worker to be ready)"


@pytest.fixture
def jobs(cluster: LocalCluster, namespace: str, reconciler: ReconcilerControl) -> Jobs:
    return Jobs(cluster, namespace)


@pytest.fixture
def gpu_node(cluster: LocalCluster, namespace: str) -> Iterator[str]:
    """The name of a fake node with room for two GPU workers, created by the test when it calls for
    capacity (``add_node``) and deleted afterwards."""
    name = f"gpus-{namespace[-6:]}"
    yield name
    cluster.rest.request("DELETE", f"/api/v1/nodes/{name}")


def add_node(cluster: LocalCluster, name: str) -> None:
    node = build_node(NodePool(count=1, gpus_per_node=2 * GPUS_PER_WORKER, name_prefix=name), 0)
    node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    node["status"]["addresses"] = [{"type": "InternalIP", "address": "10.240.9.1"}, {"type": "Hostname",
                                                                                      "address": name}]
    cluster.rest.create("/api/v1/nodes", node)
    wait_for(lambda: not unready_nodes(cluster.rest, [name]), timeout=60, what=f"node {name} schedulable")


def gpu_job(name: str, workers: int, **spec: Any) -> JSON:
    job = mpijob(name, workers, launcher_labels=HANG, **spec)
    container = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/gpu": str(GPUS_PER_WORKER)}}
    return job


def workers_ready(jobs: Jobs, job: str, reason: str) -> JSON:
    def found() -> JSON | None:
        cond = jobs.condition(job, "WorkersReady")
        return cond if cond and cond["reason"] == reason else None

    return until(found, timeout=60, what=f"{job} WorkersReady reason {reason}")


def events(jobs: Jobs, job: str, reason: str) -> list[JSON]:
    return [e for e in jobs.events(job) if e["reason"] == reason]


def mpij_row(cluster: LocalCluster, jobs: Jobs, job: str, *flags: str) -> tuple[list[str], str]:
    """``kubectl get mpij <job>``: the header's column names and the job's row."""
    lines = cluster.kubectl("-n", jobs.ns, "get", "mpij", job, *flags, check=True).stdout.splitlines()
    return lines[0].split(), lines[1]


def test_unschedulable_workers_say_why_until_capacity_appears(jobs: Jobs, cluster: LocalCluster,
                                                             gpu_node: str) -> None:
    jobs.create(gpu_job("pi", 2, launcherCreationPolicy="WaitForWorkersReady"))
    condition = workers_ready(jobs, "pi", "Unschedulable")
    nodes = len(cluster.rest.get("/api/v1/nodes")["items"])

    def scheduler_answers() -> list[JSON] | None:  # the condition may have been written after the first one
        found = [c for p in jobs.workers("pi") for c in p["status"].get("conditions") or []
                 if c["type"] == "PodScheduled"]
        return found if len(found) == 2 else None

    scheduled = until(scheduler_answers, timeout=30, what="the scheduler's answer for both workers")
    scheduler_says = scheduled[0]["message"]
    assert scheduler_says.startswith(f"0/{nodes} nodes are available: ")
    assert f"{nodes} Insufficient nvidia.com/gpu." in scheduler_says
    assert [(c["status"], c["reason"], c["message"]) for c in scheduled] == [
        ("False", "Unschedulable", scheduler_says)] * 2
    assert condition["status"] == "False"
    assert condition["message"] == f"2/2 workers pending: {scheduler_says}{WAITS}"
    until(lambda: events(jobs, "pi", "Unschedulable") or None, timeout=30, what="the Unschedulable event")
    header, row = mpij_row(cluster, jobs, "pi")
    assert header == ["NAME", "STATE", "WORKERS", "READY", "RESTARTS", "AGE"]
    assert row.split()[:4] == ["pi", "Created", "2", "0/2"]
    header, row = mpij_row(cluster, jobs, "pi", "-o", "wide")
    assert header == ["NAME", "STATE", "WORKERS", "READY", "RESTARTS", "IMPLEMENTATION", "SLOTS", "WORKERS-REASON",
                      "AGE"]
    assert row.split()[:7] == ["pi", "Created", "2", "0/2", "OpenMPI", "1", "Unschedulable"]
    describe = cluster.kubectl("-n", jobs.ns, "describe", "mpij", "pi", check=True).stdout
    assert condition["message"][:60] in describe, "describe shows why"
    assert jobs.launcher("pi") is None, "WaitForWorkersReady: no launcher while workers are pending"

    add_node(cluster, gpu_node)
    ready = workers_ready(jobs, "pi", "WorkersReady")
    assert (ready["status"], ready["message"]) == ("True", "2/2 workers ready")
    assert ready["lastTransitionTime"] >= condition["lastTransitionTime"]
    jobs.wait_condition("pi", "Running")
    assert {p["spec"]["nodeName"] for p in jobs.workers("pi")} == {gpu_node}
    header, row = mpij_row(cluster, jobs, "pi")
    assert row.split()[:4] == ["pi", "Running", "2", "2/2"]
    status = jobs.get("pi")["status"]
    assert [c["type"] for c in status["conditions"]] == ["WorkersReady", "Created", "Running"]
    unschedulable = events(jobs, "pi", "Unschedulable")
    same = [e for e in unschedulable if e["message"] == condition["message"]]
    assert len(same) == 1, unschedulable
    assert same[0]["type"] == "Warning"
    ready_events = until(lambda: events(jobs, "pi", "WorkersReady") or None, timeout=30,
                         what="the WorkersReady event (the workers may have passed through ContainerCreating)")
    assert [(e["type"], e["message"]) for e in ready_events] == [("Normal", "2/2 workers ready")]


QUOTA_REFUSAL = re.compile(r'pods "pi-worker-[0-3]" is forbidden: exceeded quota: two-pods, requested: pods=1, '
                           r"used: pods=2, limited: pods=2")


def test_refused_creates_say_why_once(jobs: Jobs, cluster: LocalCluster) -> None:
    quota = jobs.pod_quota("two-pods", 2)
    jobs.create(mpijob("pi", 4, launcher_labels=HANG))
    condition = workers_ready(jobs, "pi", "CreateFailed")
    assert condition["status"] == "False"
    prefix, _, refusal = condition["message"].partition(" workers pending: ")
    assert re.fullmatch(r"[0-4]/4", prefix), condition["message"]
    assert QUOTA_REFUSAL.fullmatch(refusal), refusal
    def three_failures() -> list[JSON] | None:
        failures = events(jobs, "pi", "MPIJobFailed")
        return failures if len(failures) >= 3 else None

    failed = until(three_failures, timeout=60, what="three syncs failing on the quota")
    api_says = {e["message"].removeprefix("worker pod created failed: 403 Forbidden: ") for e in failed}
    assert refusal in api_says, "the condition carries the API's own message"
    header, row = mpij_row(cluster, jobs, "pi")
    assert header == ["NAME", "STATE", "WORKERS", "READY", "RESTARTS", "AGE"]
    assert re.fullmatch(r"[0-4]/4", row.split()[3]), row

    cluster.rest.request("DELETE", quota)
    ready = workers_ready(jobs, "pi", "WorkersReady")
    assert (ready["status"], ready["message"]) == ("True", "4/4 workers ready")
    jobs.wait_condition("pi", "Running")
    refused = events(jobs, "pi", "CreateFailed")
    assert [(e["type"], e["message"]) for e in refused] == [("Warning", condition["message"])], (
        "one event for the cause, however many syncs failed on it")
