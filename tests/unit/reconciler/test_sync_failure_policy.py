"""The failurePolicy in a sync (docs/proposals/v2.md): the restart's one status write first (the commit point), the
teardown, nothing created while an older attempt's objects exist, the next attempt labelled, FailJob and
ReachedMaxRestarts, no rule satisfied as v2beta1, a cache behind our own write and a reconciler restart."""

from __future__ import annotations

import copy
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from reconciler.mpijob import builders
from reconciler.mpijob.caches import slim_pod
from reconciler.mpijob.context import Shared
from reconciler.mpijob.controller import Controller
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.mpijob.metrics import OperatorMetrics
from reconciler.mpijob.policy_decisions import with_attempt
from reconciler.mpijob.status import Event
from reconciler.mpijob.sync import Reconciler
from reconciler.runtime.api_resources import JOBS, PODS
from reconciler.runtime.client import ApiError, KubeClient
from reconciler.runtime.workqueue import WorkQueue
from reconciler.settings import Settings
from shared.api.v2_spec_annotation import canonical_json
from shared.jsondict import JSONDict
from tests.unit.reconciler.test_sync import KEYS, NOW, T, World, condition, created_condition, defaulted, new_mpijob

JSON = dict[str, Any]
ANNOTATION = "mpijobs.kubeflow.org/v2-spec"
DISRUPTED = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
             "message": "Eviction API: evicting", "lastTransitionTime": "2026-11-29T11:59:00Z"}
RULES = [
    {"name": "badArguments", "action": "FailJob", "onReplicaTypes": ["Launcher"],
     "onExitCodes": {"operator": "In", "values": [2]}},
    {"name": "disrupted", "action": "RestartJob", "onPodConditions": [{"status": "True", "type": "DisruptionTarget"}]},
]
RESTART_MESSAGE = ('restart 1/2 by rule "disrupted": Worker pod test-worker-1: DisruptionTarget=True '
                   "(EvictionByEvictionAPI): Eviction API: evicting")
RESTARTING = condition("Restarting", "True", "RestartJobFailurePolicyAction", RESTART_MESSAGE)
WORKERS_RESTARTING = condition("WorkersReady", "False", "MPIJobRestarting", "MPIJob restarting: workers are recreated")
RUNNING = condition("Running", "True", "MPIJobRunning", "MPIJob default/test is running.")


def policy_job(max_restarts: int = 2, status: JSONDict | None = None) -> JSONDict:
    job = new_mpijob(workers=2)
    policy = {"spec": {"runPolicy": {"failurePolicy": {"maxRestarts": max_restarts, "rules": RULES}}}}
    job["metadata"]["annotations"] = {ANNOTATION: canonical_json(policy)}
    if status is not None:
        job["status"] = status
    return job


def running_status(restarts: int = 0) -> JSONDict:
    return {"conditions": [condition("WorkersReady", "True", "WorkersReady", "2/2 workers ready"), created_condition(),
                           RUNNING],
            "readyWorkers": "2/2", "restartCount": restarts, "startTime": T,
            "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 2}}}


def add_attempt(world: World, attempt: int, worker_status: dict[int, JSONDict] | None = None) -> None:
    """The workers (Running and ready unless told) and the launcher Job (with one Running pod) of an attempt."""
    assert world.job is not None
    job = defaulted(world.job)
    for index in range(2):
        pod = with_attempt(builders.build_worker(job, index), attempt)
        pod["metadata"]["uid"] = f"worker-{attempt}-{index}"
        pod["status"] = (worker_status or {}).get(index) or {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        world.cluster.given(PODS, pod)
    launcher = with_attempt(builders.build_launcher_job(job), attempt)
    launcher["metadata"]["uid"] = f"launcher-{attempt}"
    launcher["status"] = {"active": 1}
    world.cluster.given(JOBS, launcher)
    labels = launcher["spec"]["template"]["metadata"]["labels"]
    world.cluster.given(PODS, {"metadata": {
        "name": f"test-launcher-{attempt}", "namespace": "default", "labels": labels, "uid": f"lpod-{attempt}",
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "test-launcher",
                             "uid": f"launcher-{attempt}", "controller": True}]},
        "status": {"phase": "Running"}})


def evicted() -> JSONDict:
    return {"phase": "Failed", "reason": "Evicted", "message": "evicted", "conditions": [DISRUPTED]}


def restarted_world(max_restarts: int = 2) -> World:
    world = World(policy_job(max_restarts, running_status()))
    world.add_dependencies()
    add_attempt(world, 0, {1: evicted()})
    return world


def restarted_total(world: World) -> float | None:
    return world.metrics.registry.get_sample_value("mpi_operator_jobs_restarted_total")


async def test_a_new_job_with_a_failure_policy_labels_its_attempt_and_counts_no_restart() -> None:
    world = World(policy_job())
    await world.sync()
    job = defaulted(world.job or {})
    assert world.cluster.created("pods", "test-worker-1") == with_attempt(builders.build_worker(job, 1), 0)
    assert world.cluster.created("jobs", "test-launcher") == with_attempt(builders.build_launcher_job(job), 0)
    assert world.cluster.status_written()["restartCount"] == 0


async def test_a_disrupted_worker_restarts_the_job_status_first_then_the_teardown() -> None:
    world = restarted_world()
    assert await world.sync() == "restarted"
    assert world.cluster.actions == [
        ("update_status", "mpijobs", "test"), ("delete", "jobs", "test-launcher"),
        ("delete", "pods", "test-worker-0"), ("delete", "pods", "test-worker-1")]
    assert [body.get("propagationPolicy") for verb, _, _, body in world.cluster.writes if verb == "delete"] == [
        "Foreground", "Background", "Background"]
    assert world.cluster.status_written() == {
        "conditions": [WORKERS_RESTARTING, created_condition(), RESTARTING],
        "readyWorkers": "0/2", "restartCount": 1,
        "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 2}}}
    assert world.cluster.events == [Event("Warning", "RestartJobFailurePolicyAction", RESTART_MESSAGE)]
    assert restarted_total(world) == 1


async def test_nothing_is_created_while_the_old_attempt_is_terminating_then_the_next_one_starts() -> None:
    world = restarted_world()
    await world.sync()
    world.cluster.catch_up()
    # the launcher Job and a worker are still terminating (the fake deleted them: give them back, terminating)
    job = defaulted(world.job or {})
    for resource, obj in ((JOBS, builders.build_launcher_job(job)), (PODS, builders.build_worker(job, 0))):
        terminating = with_attempt(obj, 0)
        terminating["metadata"].update(uid="old", deletionTimestamp=T)
        world.cluster.given(resource, terminating)
    writes = len(world.cluster.actions)
    assert await world.sync() == "restarting"
    assert world.cluster.actions[writes:] == [], "nothing deleted twice, nothing created, the status unchanged"
    del world.cluster.server[("jobs", "default", "test-launcher")]
    del world.cluster.server[("pods", "default", "test-worker-0")]
    world.cluster.catch_up()
    assert await world.sync() == "synced"
    assert world.cluster.created("pods", "test-worker-0") == with_attempt(builders.build_worker(job, 0), 1)
    assert world.cluster.created("jobs", "test-launcher") == with_attempt(builders.build_launcher_job(job), 1)
    assert world.cluster.status_written() == {
        "conditions": [condition("WorkersReady", "False", "WorkersStarting", "2/2 workers pending: waiting to start"),
                       created_condition(), RESTARTING],
        "readyWorkers": "0/2", "restartCount": 1, "startTime": T,
        "replicaStatuses": {"Launcher": {}, "Worker": {}}}
    assert [e.reason for e in world.cluster.events] == ["RestartJobFailurePolicyAction"]


async def test_one_failure_never_restarts_twice_even_with_a_cache_behind_our_write() -> None:
    world = restarted_world()
    await world.sync()
    # the caches still show restartCount 0, the failed worker and the old launcher: the attempt is the one we
    # committed, so they are old objects this process is deleting already, and the stale status write conflicts
    writes = len(world.cluster.actions)
    with pytest.raises(ApiError) as raised:
        await world.sync()
    assert raised.value.status == 409
    assert world.cluster.actions[writes:] == [("update_status", "mpijobs", "test")]
    assert [e.reason for e in world.cluster.events] == ["RestartJobFailurePolicyAction"]
    assert restarted_total(world) == 1


async def test_a_reconciler_stopped_after_the_commit_point_finishes_the_teardown_from_the_stored_count() -> None:
    world = restarted_world()
    world.cluster.failures[("delete", "jobs")] = ApiError(500, "InternalError", "stopped here")
    with pytest.raises(ApiError):
        await world.sync()
    del world.cluster.failures[("delete", "jobs")]
    world.cluster.catch_up()  # a new process lists everything: restartCount 1, the old attempt's objects
    world.reconciler = Reconciler(Shared(world.caches, world.cluster, Settings(), lambda: KEYS),
                                  OperatorMetrics(CollectorRegistry()), lambda: NOW)
    writes = len(world.cluster.actions)
    assert await world.sync() == "restarting"
    assert world.cluster.actions[writes:] == [
        ("delete", "jobs", "test-launcher"), ("delete", "pods", "test-worker-0"), ("delete", "pods", "test-worker-1")]
    assert [e.reason for e in world.cluster.events] == ["RestartJobFailurePolicyAction"]
    world.cluster.catch_up()
    await world.sync()
    assert world.cluster.created("pods", "test-worker-1")["metadata"]["labels"][
        "mpijobs.kubeflow.org/restart-attempt"] == "1"


async def test_the_last_allowed_restart_then_reached_max_restarts() -> None:
    world = World(policy_job(1, running_status(restarts=1)))
    world.add_dependencies()
    add_attempt(world, 1, {1: evicted()})
    assert await world.sync() == "failed"
    message = ('MPIJob default/test has failed: reached maxRestarts (1), rule "disrupted": Worker pod test-worker-1: '
               "DisruptionTarget=True (EvictionByEvictionAPI): Eviction API: evicting")
    assert world.cluster.actions == [("update_status", "mpijobs", "test"), ("patch", "jobs", "test-launcher")]
    assert world.cluster.status_written() == {
        **running_status(restarts=1), "completionTime": T,
        "conditions": [condition("WorkersReady", "True", "WorkersReady", "2/2 workers ready"), created_condition(),
                       {**RUNNING, "status": "False"}, condition("Failed", "True", "ReachedMaxRestarts", message)]}
    assert world.cluster.events == [Event("Warning", "ReachedMaxRestarts", message)]
    assert world.metrics.registry.get_sample_value("mpi_operator_jobs_failed_total") == 1


async def test_fail_job_rule() -> None:
    world = World(policy_job(status=running_status()))
    world.add_dependencies()
    add_attempt(world, 0)
    launcher_pod = copy.deepcopy(world.cluster.server[("pods", "default", "test-launcher-0")])
    launcher_pod["status"] = {"phase": "Failed", "containerStatuses": [
        {"name": "launcher", "state": {"terminated": {"exitCode": 2, "finishedAt": T}}}]}
    world.cluster.given(PODS, launcher_pod)
    assert await world.sync() == "failed"
    message = ('MPIJob default/test has failed by rule "badArguments": Launcher pod test-launcher-0: '
               "container launcher exited with 2")
    assert world.cluster.events == [Event("Warning", "FailJobFailurePolicyAction", message)]
    assert world.cluster.status_written()["conditions"][-1] == condition(
        "Failed", "True", "FailJobFailurePolicyAction", message)


async def test_no_rule_satisfied_is_v2beta1s_eviction() -> None:
    world = World(policy_job(status=running_status()))
    world.add_dependencies()
    add_attempt(world, 0, {1: {"phase": "Failed", "reason": "Evicted", "message": "The node was low on memory."}})
    assert await world.sync() == "synced"
    assert [e.reason for e in world.cluster.events] == ["MPIJobEvicted"]
    assert world.cluster.status_written()["restartCount"] == 0


async def test_a_completed_launcher_wins_over_a_failed_worker() -> None:
    world = World(policy_job(status=running_status()))
    world.add_dependencies()
    add_attempt(world, 0, {1: evicted()})
    launcher = copy.deepcopy(world.cluster.server[("jobs", "default", "test-launcher")])
    launcher["status"] = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1,
                          "completionTime": T}
    world.cluster.given(JOBS, launcher)
    await world.sync()
    assert [e.reason for e in world.cluster.events] == ["MPIJobSucceeded"]


async def test_an_invalid_annotation_is_a_validation_error() -> None:
    job = new_mpijob(workers=1)
    job["metadata"]["annotations"] = {ANNOTATION: '{"spec":{"runPolicy":{"failurePolicy":{"rules":[]}}}}'}
    world = World(job)
    assert await world.sync() == "invalid"
    assert world.cluster.actions == []
    assert [e.reason for e in world.cluster.events] == ["ValidationError"]


async def test_running_again_flips_restarting_to_false_and_keeps_its_cause() -> None:
    status = {**running_status(restarts=1), "conditions": [WORKERS_RESTARTING, created_condition(), RESTARTING]}
    del status["startTime"]
    world = World(policy_job(status=status))
    world.add_dependencies()
    add_attempt(world, 1)
    await world.sync()
    written = world.cluster.status_written()
    assert written["conditions"][1:] == [created_condition(), {**RESTARTING, "status": "False"}, RUNNING]
    assert (written["startTime"], written["restartCount"], written["readyWorkers"]) == (T, 1, "2/2")


def removed(world: World) -> list[JSONDict]:
    """The removed pods the job's record keeps."""
    book = world.reconciler.shared.book
    return book.record("job-uid").removed_pods() if "job-uid" in book else []


def removed_worker(world: World) -> JSONDict:
    """Worker 1, evicted, as the watch last delivered it, then removed from the API (and the cache)."""
    pod = copy.deepcopy(world.cluster.server[("pods", "default", "test-worker-1")])
    pod["status"] = evicted()
    slim = slim_pod(pod)
    assert slim is not None
    del world.cluster.server[("pods", "default", "test-worker-1")]
    world.cluster.catch_up()
    world.reconciler.shared.book.keep_removed("job-uid", slim)
    return slim


async def test_a_failed_worker_removed_before_any_sync_saw_it_still_restarts_the_job() -> None:
    world = World(policy_job(status=running_status()))
    world.add_dependencies()
    add_attempt(world, 0)
    removed_worker(world)
    world.cluster.failures[("update_status", "mpijobs")] = ApiError(409, "Conflict", "changed")
    with pytest.raises(ApiError):
        await world.sync()
    assert removed(world) != [], "kept for the next sync"
    del world.cluster.failures[("update_status", "mpijobs")]
    assert await world.sync() == "restarted"
    assert world.cluster.events == [Event("Warning", "RestartJobFailurePolicyAction", RESTART_MESSAGE)]
    assert removed(world) == []


async def test_a_worker_removed_while_suspended_is_no_failure() -> None:
    world = World(policy_job(status=running_status()))
    world.add_dependencies()
    add_attempt(world, 0)
    removed_worker(world)
    suspended = copy.deepcopy(world.cluster.server[("mpijobs", "default", "test")])
    suspended["spec"]["runPolicy"]["suspend"] = True
    world.cluster.given(MPIJOBS, suspended)
    await world.sync()
    assert [e.reason for e in world.cluster.events if e.type == "Warning"] == []
    assert removed(world) == []


async def test_the_controller_keeps_a_removed_failed_pod_and_forgets_it_and_the_count_with_the_job() -> None:
    world = World()
    controller = Controller(cast(KubeClient, None), world.reconciler, WorkQueue())  # its stores are the caches
    world.job = policy_job(status=running_status())
    world.cluster.given(MPIJOBS, world.job)
    world.add_dependencies()
    add_attempt(world, 0)
    gone = copy.deepcopy(world.cluster.server[("pods", "default", "test-worker-1")])
    gone["status"] = evicted()
    slim = slim_pod(gone)
    controller._on_child(slim, None)  # the informer's delete event
    assert removed(world) == [slim]
    assert await world.sync() == "restarted"
    assert world.reconciler.shared.book.record("job-uid").restarts == 1
    controller._on_child(slim, None)
    controller._on_mpijob(world.caches.mpijobs.delete("default", "test"), None)
    assert len(world.reconciler.shared.book) == 0, "a deleted job's record goes with it"
