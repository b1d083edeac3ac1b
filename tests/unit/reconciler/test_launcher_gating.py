"""Launcher gating (reconciler/mpijob/gating.py, docs/proposals/launcher-gating.md): under WaitForWorkersReady
the launcher Job is held suspended after a resume until every worker is Ready, its scheduling directives synced
before the release; AtStartup is upstream's; a released launcher is never suspended for readiness; the Running
condition says why a job waits; the metric times the wait."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from reconciler.mpijob import builders, gating
from reconciler.mpijob.builders import GangScheduling
from reconciler.mpijob.context import Shared
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.mpijob.metrics import OperatorMetrics
from reconciler.mpijob.sync import Reconciler
from reconciler.runtime.api_resources import CONFIG_MAPS, SECRETS
from reconciler.settings import Settings
from shared.jsondict import JSONDict
from tests.unit.reconciler.test_sync import (
    EARLIER,
    KEYS,
    NOW,
    T,
    World,
    condition,
    created_condition,
    defaulted,
    new_mpijob,
    suspended_conditions,
    suspended_workers,
    workers_ready,
)

WAIT = "WaitForWorkersReady"
LATER = "2026-11-29T12:05:00Z"
DIRECTIVES = {"nodeSelector": {"pool": "a"}, "tolerations": [{"key": "pool", "operator": "Exists"}],
              "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}]}


def resumed_job(policy: str, workers: int = 2) -> JSONDict:
    """A job suspended earlier (its launcher Job suspended, its workers gone), now resumed with new directives
    in the launcher's template (what Kueue writes at admission)."""
    job = new_mpijob(workers=workers, launcherCreationPolicy=policy)
    job["status"] = {"startTime": EARLIER, "replicaStatuses": {"Launcher": {}, "Worker": {}}, "conditions": [
        suspended_workers(EARLIER), created_condition(), *suspended_conditions(EARLIER)]}
    return job


def resumed_world(policy: str, workers: int = 2) -> World:
    job = resumed_job(policy, workers)
    world = World(job)
    model = defaulted(job)
    world.cluster.given(CONFIG_MAPS, builders.build_config_map(model, "", []))
    world.cluster.given(SECRETS, builders.build_ssh_secret(model, KEYS))
    world.add_launcher(suspend=True, status={"startTime": EARLIER})
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"].update(DIRECTIVES)
    world.cluster.given(MPIJOBS, job)
    return world


def waiting(ready: int, of: int, at: str = T, since: str = EARLIER) -> JSONDict:
    return condition("Running", "False", "WaitingForWorkers",
                     f"MPIJob default/test waits for its workers: {ready}/{of} workers ready", at) | {
        "lastTransitionTime": since}


def resumed() -> JSONDict:
    return condition("Suspended", "False", "MPIJobResumed", "MPIJob resumed")


async def test_a_resumed_job_waiting_for_its_workers_keeps_its_launcher_suspended() -> None:
    world = resumed_world(WAIT)
    await world.sync()
    assert world.cluster.actions == [("create", "services", "test"), ("create", "pods", "test-worker-0"),
                                     ("create", "pods", "test-worker-1"), ("update_status", "mpijobs", "test")]
    status = world.cluster.status_written()
    assert status["conditions"] == [
        workers_ready("False", "WorkersStarting", "2/2 workers pending: waiting to start (the launcher waits for "
                      "every worker to be ready)", EARLIER) | {"lastUpdateTime": T},
        created_condition(), waiting(0, 2), resumed()], "Running keeps its place: the State column says Suspended"
    assert [e.reason for e in world.cluster.events] == ["MPIJobResumed"]


async def test_the_launcher_is_released_with_its_directives_once_every_worker_is_ready() -> None:
    world = resumed_world(WAIT)
    await world.sync()
    world.cluster.catch_up()
    world.add_workers(1, "Running", ready=True)
    world.add_workers(1, "Running", start=1)
    await world.sync()
    assert ("update", "jobs", "test-launcher") not in world.cluster.actions, "one worker of two ready: still held"
    world.cluster.catch_up()
    world.add_workers(2, "Running", ready=True)
    before = len(world.cluster.actions)
    await world.sync()
    assert world.cluster.actions[before:] == [
        ("update_status", "jobs", "test-launcher"), ("update", "jobs", "test-launcher"),
        ("update_status", "mpijobs", "test")]
    updated = next(body for verb, kind, _, body in world.cluster.writes if (verb, kind) == ("update", "jobs"))
    assert updated["spec"]["suspend"] is False
    pod_spec = updated["spec"]["template"]["spec"]
    assert {key: pod_spec[key] for key in DIRECTIVES} == DIRECTIVES
    running = next(c for c in world.cluster.status_written()["conditions"] if c["type"] == "Running")
    assert running == condition("Running", "False", "LauncherStarting",
                                "MPIJob default/test: 2/2 workers ready, the launcher is starting") | {
        "lastTransitionTime": EARLIER}
    assert world.metrics.registry.get_sample_value("mpi_operator_launcher_gated_seconds_count") == 1, \
        "the write that released the launcher observed the wait"


async def test_ready_workers_whose_names_do_not_resolve_yet_keep_the_launcher_held_and_requeue_the_job() -> None:
    world = resumed_world(WAIT)
    requeued: list[tuple[str, float]] = []
    world.reconciler.shared.requeue = lambda key, delay: requeued.append((key, delay))
    await world.sync()
    world.cluster.catch_up()
    world.add_workers(2, "Running", ready=True, published=False)
    before = len(world.cluster.actions)
    await world.sync()
    assert world.cluster.actions[before:] == [("patch", "configmaps", "test-config"),  # discover_hosts.sh
                                              ("update_status", "mpijobs", "test")], "held: not released"
    assert requeued == [("default/test", 0.5)]
    assert world.cluster.reads[-1] == ("endpointslices", "?kubernetes.io/service-name=test")
    running = next(c for c in world.cluster.status_written()["conditions"] if c["type"] == "Running")
    assert running == condition("Running", "False", "WaitingForWorkers", "MPIJob default/test waits for its "
                                "workers: 2/2 workers ready, waiting for their names to resolve") | {
        "lastTransitionTime": EARLIER}
    world.cluster.catch_up()
    world.publish_workers()
    before = len(world.cluster.actions)
    await world.sync()
    assert world.cluster.actions[before:] == [
        ("update_status", "jobs", "test-launcher"), ("update", "jobs", "test-launcher"),
        ("update_status", "mpijobs", "test")]
    assert requeued == [("default/test", 0.5)], "not requeued again"


async def test_a_launcher_created_after_its_workers_waits_for_their_names_too() -> None:
    world = World(new_mpijob(workers=2, launcherCreationPolicy=WAIT))
    world.add_dependencies()
    world.add_workers(2, "Running", ready=True, published=False)
    await world.sync()
    assert ("create", "jobs", "test-launcher") not in world.cluster.actions
    world.cluster.catch_up()
    world.publish_workers()
    await world.sync()
    assert ("create", "jobs", "test-launcher") in world.cluster.actions


def endpoint(uid: str, *, hostname: str | None = "h", ready: bool | None = True) -> JSONDict:
    conditions = {} if ready is None else {"ready": ready}
    found: JSONDict = {"addresses": ["10.0.0.1"], "conditions": conditions, "targetRef": {"kind": "Pod", "uid": uid}}
    return found | ({"hostname": hostname} if hostname else {})


@pytest.mark.parametrize(("endpoints", "unpublished"), [
    ([endpoint("a"), endpoint("b")], []),
    ([endpoint("a"), endpoint("b", ready=None)], []),  # an unset ready means ready (the API's documentation)
    ([endpoint("a"), endpoint("b", ready=False)], ["w-b"]),  # CoreDNS serves ready endpoints only
    ([endpoint("a"), endpoint("b", hostname=None)], ["w-b"]),  # no hostname: no <hostname>.<service> record
    ([endpoint("a"), endpoint("old-b")], ["w-b"]),  # the predecessor's endpoint, with its old address
    ([], ["w-a", "w-b"]),
])
def test_a_worker_resolves_once_a_ready_endpoint_with_its_hostname_refers_to_it(endpoints: list[JSONDict],
                                                                                unpublished: list[str]) -> None:
    workers = [{"metadata": {"name": "w-a", "uid": "a"}}, {"metadata": {"name": "w-b", "uid": "b"}}]
    slices = [{"endpoints": endpoints[:1]}, {"endpoints": endpoints[1:]}]
    assert gating.unpublished(workers, slices) == unpublished


async def test_at_startup_releases_the_launcher_in_the_sync_that_resumes_it_as_upstream() -> None:
    world = resumed_world("AtStartup")
    await world.sync()
    assert world.cluster.actions == [
        ("create", "services", "test"), ("create", "pods", "test-worker-0"), ("create", "pods", "test-worker-1"),
        ("update_status", "jobs", "test-launcher"), ("update", "jobs", "test-launcher"),
        ("update_status", "mpijobs", "test")]
    conditions = world.cluster.status_written()["conditions"]
    assert [(c["type"], c["reason"]) for c in conditions] == [
        ("WorkersReady", "WorkersStarting"), ("Created", "MPIJobCreated"), ("Running", "MPIJobSuspended"),
        ("Suspended", "MPIJobResumed")]


async def test_a_released_launcher_is_not_suspended_when_a_worker_stops_being_ready() -> None:
    job = new_mpijob(workers=2, launcherCreationPolicy=WAIT)
    running = condition("Running", "True", "MPIJobRunning", "MPIJob default/test is running.", EARLIER)
    job["status"] = {"conditions": [created_condition(), running], "startTime": EARLIER}
    world = World(job)
    world.add_dependencies([f"test-worker-{i}" for i in range(2)])
    world.add_workers(1, "Running", ready=True)
    world.add_workers(1, "Running", start=1)
    world.add_launcher(suspend=False, pods=[{"phase": "Running"}])
    await world.sync()
    assert [a for a in world.cluster.actions if a[1] == "jobs"] == []
    assert next(c for c in world.cluster.status_written()["conditions"] if c["type"] == "Running") == running


async def test_a_new_count_alone_is_not_written_but_is_carried_along() -> None:
    world = resumed_world(WAIT, workers=3)
    await world.sync()
    world.cluster.catch_up()
    world.add_workers(3, "Pending")
    await world.sync()  # the workers' phase changed, nothing else: no write yet (the settler spaces counts)
    world.cluster.catch_up()
    world.add_workers(1, "Running", ready=True)
    world.add_workers(2, "Running", start=1)
    written = len([a for a in world.cluster.actions if a == ("update_status", "mpijobs", "test")])
    await world.sync()
    writes = [a for a in world.cluster.actions if a == ("update_status", "mpijobs", "test")]
    assert len(writes) == written + 1, "the Worker active count changed: one write"
    running = next(c for c in world.cluster.status_written()["conditions"] if c["type"] == "Running")
    assert running == waiting(1, 3), "the count rode along, lastUpdateTime still the wait's start"
    world.cluster.catch_up()
    world.add_workers(2, "Running", ready=True)
    world.add_workers(1, "Running", start=2)
    await world.sync()
    assert world.cluster.actions.count(("update_status", "mpijobs", "test")) == written + 1, "a new count alone"


@pytest.mark.parametrize(("before", "after", "span"), [
    (waiting(0, 2, EARLIER), condition("Running", "False", "LauncherStarting", "x", LATER), (EARLIER, LATER)),
    (waiting(0, 2, EARLIER), condition("Running", "True", "MPIJobRunning", "x", LATER), (EARLIER, LATER)),
    (waiting(0, 2, EARLIER), condition("Running", "False", "MPIJobSuspended", "x", LATER), None),
    (condition("Running", "False", "MPIJobSuspended", "x"), condition("Running", "True", "MPIJobRunning", "x"), None),
    (waiting(0, 2, EARLIER), waiting(1, 2, EARLIER), None),
], ids=["released", "released-and-running", "suspended-while-waiting", "at-startup", "still-waiting"])
def test_the_gate_span_is_a_wait_ended_by_a_release(before: JSONDict, after: JSONDict,
                                                    span: tuple[str, str] | None) -> None:
    assert gating.gate_span({"conditions": [before]}, {"conditions": [after]}) == span


def test_the_metric_observes_the_seconds_a_release_ended() -> None:
    metrics = OperatorMetrics(CollectorRegistry())
    job: dict[str, Any] = {"metadata": {"creationTimestamp": EARLIER}}
    released = condition("Running", "False", "LauncherStarting", "x", LATER)
    metrics.observe_written(job, {"conditions": [waiting(0, 2, T)]}, {"conditions": [released]})
    registry = metrics.registry
    assert registry.get_sample_value("mpi_operator_launcher_gated_seconds_count") == 1
    assert registry.get_sample_value("mpi_operator_launcher_gated_seconds_sum") == 300.0
    metrics.observe_written(job, {"conditions": [released]}, {"conditions": [released]})
    assert registry.get_sample_value("mpi_operator_launcher_gated_seconds_count") == 1, "once per wait"


@pytest.mark.parametrize("gang", ["volcano", "scheduler-plugins-scheduler", "kube-scheduler"])
async def test_a_gang_never_counts_a_held_launcher(gang: str) -> None:
    """Resumed under every gang backend: the gang is made for the two workers only, and the launcher Job stays
    suspended while they are not Ready (a gang that counted it would wait for a pod that waits for the gang)."""
    job = resumed_job(WAIT)
    world = resumed_world(WAIT)
    settings = GangScheduling(gang)
    world.reconciler = Reconciler(Shared(world.caches, world.cluster, Settings(gang=settings), lambda: KEYS),
                                  OperatorMetrics(CollectorRegistry()), lambda: NOW)
    await world.sync()
    created = [(verb, kind) for verb, kind, _ in world.cluster.actions if verb == "create"]
    gang_kinds = [("create", "workloads"), ("create", "podgroups")] if gang == "kube-scheduler" else [
        ("create", "podgroups")]
    assert created == [("create", "services"), *gang_kinds, ("create", "pods"), ("create", "pods")]
    assert ("update", "jobs", "test-launcher") not in world.cluster.actions
    group = world.cluster.created("podgroups", "test")
    if gang == "kube-scheduler":
        assert world.cluster.created("workloads", "test")["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {
            "gang": {"minCount": 2}}
    else:
        assert group["spec"]["minMember"] == 2
    assert builders.calculate_min_available(defaulted(job)) == 2
