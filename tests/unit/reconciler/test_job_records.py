"""What the reconciler remembers of a job is one record keyed by the MPIJob's UID, forgotten with the job (design
rule 9): a job failed by a rule, deleted and created again under its name is not failed or restarted by its
predecessor's pods, whatever order the deletions are seen in, and a deleted job leaves nothing behind. Pods a
suspension deleted are no failures after the resume."""

from __future__ import annotations

import copy
from typing import cast

import pytest

from reconciler.mpijob.caches import slim_pod
from reconciler.mpijob.controller import Controller
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.mpijob.errors import ResourceExistsError
from reconciler.mpijob.records import JobBook
from reconciler.mpijob.status import Event
from reconciler.runtime.api_resources import PODS, Resource
from reconciler.runtime.client import KubeClient
from reconciler.runtime.workqueue import WorkQueue
from shared.api.v2_spec_annotation import canonical_json
from shared.jsondict import JSONDict
from tests.unit.reconciler.test_sync import T, World, new_mpijob
from tests.unit.reconciler.test_sync_failure_policy import (
    ANNOTATION,
    DISRUPTED,
    add_attempt,
    policy_job,
    running_status,
)

ATTEMPT = "mpijobs.kubeflow.org/restart-attempt"
BAD_ARGUMENTS = ('MPIJob default/test has failed by rule "badArguments": Launcher pod test-launcher-0: '
                 "container launcher exited with 2")
WORKER_STOPPED = {"spec": {"runPolicy": {"failurePolicy": {"maxRestarts": 3, "rules": [
    {"name": "workerStopped", "action": "RestartJob", "onReplicaTypes": ["Worker"],
     "onExitCodes": {"operator": "NotIn", "values": [0]}}]}}}}


def removed(name: str, uid: str, phase: str = "Failed", *, attempt: bool = True) -> JSONDict:
    labels = {"training.kubeflow.org/job-name": "pi", **({ATTEMPT: "0"} if attempt else {})}
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid, "labels": labels}, "status": {"phase": phase}}


def test_a_record_keeps_the_removed_pods_a_rule_evaluates_until_a_sync_judged_them() -> None:
    book = JobBook()
    failed = removed("pi-worker-1", "w1")
    for pod in (failed, removed("pi-worker-0", "w0", "Running"), removed("pi-worker-2", "w2", attempt=False)):
        book.keep_removed("job-uid", pod)  # running, or of a job without a failurePolicy: never kept
    book.keep_removed("", removed("x-worker-0", "x0"))  # no known owner: dropped
    assert (len(book), book.record("job-uid").removed_pods()) == (1, [failed])
    again = removed("pi-worker-1", "w1-again")  # created again under its name and removed again
    book.keep_removed("job-uid", again)
    record = book.record("job-uid")
    record.evaluated([failed])
    assert record.removed_pods() == [again]
    record.evaluated([again])
    assert record.removed_pods() == []
    book.forget("job-uid")
    assert len(book) == 0


def failed_launcher_pod(world: World) -> JSONDict:
    """The job's launcher pod, as the kubelet leaves it when ``mpirun`` exits 2 (no DisruptionTarget)."""
    pod = copy.deepcopy(world.cluster.server[("pods", "default", "test-launcher-0")])
    pod["status"] = {"phase": "Failed", "containerStatuses": [
        {"name": "launcher", "state": {"terminated": {"exitCode": 2, "finishedAt": T}}}]}
    return world.cluster.given(PODS, pod)


async def failed_by_rule() -> tuple[World, Controller]:
    """A job (UID job-uid) failed by its FailJob rule; its launcher Job is kept, with the failed pod."""
    world = World()
    controller = Controller(cast(KubeClient, None), world.reconciler, WorkQueue())  # its stores are the caches
    world.job = policy_job(status=running_status())
    world.cluster.given(MPIJOBS, world.job)
    world.add_dependencies()
    add_attempt(world, 0)
    failed_launcher_pod(world)
    assert await world.sync() == "failed"
    assert world.cluster.events == [Event("Warning", "FailJobFailurePolicyAction", BAD_ARGUMENTS)]
    world.cluster.catch_up()
    return world, controller


def collect_pods(world: World, controller: Controller) -> None:
    """The garbage collector removes the job's pods: each one's delete event, in its last state."""
    for key in [key for key in world.cluster.server if key[0] == "pods"]:
        slim = slim_pod(world.cluster.server.pop(key))
        world.caches.pods.delete(key[1], key[2])
        controller._on_child(slim, None)


def successor(world: World) -> JSONDict:
    """The same job (same name, same policy) created again: another UID, no status yet."""
    again = policy_job()
    again["metadata"]["uid"] = "second-uid"
    world.cluster.events.clear()
    world.cluster.writes.clear()
    return world.cluster.given(MPIJOBS, again)


@pytest.mark.parametrize("job_deleted_first", [True, False], ids=["job-event-first", "pod-events-first"])
async def test_a_job_recreated_under_its_name_is_not_failed_by_its_predecessors_pods(job_deleted_first: bool) -> None:
    world, controller = await failed_by_rule()
    if job_deleted_first:  # kubectl delete: background propagation, the MPIJob's event comes first
        controller._on_mpijob(world.caches.mpijobs.delete("default", "test"), None)
        collect_pods(world, controller)
    else:
        collect_pods(world, controller)
        controller._on_mpijob(world.caches.mpijobs.delete("default", "test"), None)
    assert len(world.reconciler.shared.book) == 0, "a deleted job leaves nothing behind"
    for key in [key for key in world.cluster.server if key[0] != "mpijobs"]:
        del world.cluster.server[key]  # the rest of the collection
    world.cluster.catch_up()
    successor(world)
    assert await world.sync() == "synced"
    assert [e.reason for e in world.cluster.events if e.type == "Warning"] == []
    status = world.cluster.status_written()
    assert (status["restartCount"], [cond["type"] for cond in status["conditions"]]) == (
        0, ["WorkersReady", "Created"])


async def test_a_successor_created_before_the_old_objects_are_gone_ignores_their_pods() -> None:
    """The predecessor's launcher Job (same name) and its failed pod are still there: the new job is blocked by
    the foreign Job, as upstream is, but not failed by its pod; the pod's delete event keeps nothing."""
    world, controller = await failed_by_rule()
    controller._on_mpijob(world.caches.mpijobs.delete("default", "test"), None)
    successor(world)
    with pytest.raises(ResourceExistsError):
        await world.sync()
    assert [e.reason for e in world.cluster.events] == ["ErrResourceExists"]
    assert [action for action in world.cluster.actions if action[1] == "mpijobs"] == []
    collect_pods(world, controller)
    book = world.reconciler.shared.book
    assert (len(book), book.record("second-uid").removed_pods()) == (1, []), "the successor's record only, empty"


def worker_stopped_job(suspend: bool) -> JSONDict:
    job = policy_job(status=running_status())
    job["metadata"]["annotations"] = {ANNOTATION: canonical_json(WORKER_STOPPED)}
    job["spec"]["runPolicy"]["suspend"] = suspend
    return job


async def test_the_workers_a_suspension_deleted_are_no_failures_after_the_resume() -> None:
    """Resumed before the suspension's deletions were all seen: the workers it deleted are Failed (sshd exits
    255 on SIGTERM) and terminating, one of them removed already; the resumed job is not restarted."""
    world = World()
    controller = Controller(cast(KubeClient, None), world.reconciler, WorkQueue())
    world.job = worker_stopped_job(suspend=False)
    world.cluster.given(MPIJOBS, world.job)
    world.add_dependencies()
    stopped = {"phase": "Failed", "containerStatuses": [
        {"name": "foo", "state": {"terminated": {"exitCode": 255, "finishedAt": T}}}]}
    add_attempt(world, 0, {0: stopped, 1: stopped})
    for index in range(2):
        world.cluster.server[("pods", "default", f"test-worker-{index}")]["metadata"]["deletionTimestamp"] = T
    world.cluster.catch_up()
    gone = world.cluster.server.pop(("pods", "default", "test-worker-1"))
    world.caches.pods.delete("default", "test-worker-1")
    controller._on_child(slim_pod(gone), None)
    assert world.reconciler.shared.book.record("job-uid").removed_pods() == [], "a deletion is kept for no rule"
    assert await world.sync() == "synced"
    assert [e.reason for e in world.cluster.events if "FailurePolicy" in e.reason] == []
    status = world.cluster.status_written()
    assert (status["restartCount"], [cond["type"] for cond in status["conditions"]]) == (
        0, ["WorkersReady", "Created", "Running"])


async def test_a_worker_preempted_while_the_job_runs_still_restarts_it() -> None:
    """The rule that keeps a suspension's deletions out keeps a disruption in: deleted with DisruptionTarget."""
    world = World(worker_stopped_job(suspend=False))
    world.add_dependencies()
    preempted = {"phase": "Failed", "conditions": [DISRUPTED], "containerStatuses": [
        {"name": "foo", "state": {"terminated": {"exitCode": 137, "finishedAt": T}}}]}
    add_attempt(world, 0, {1: preempted})
    world.cluster.server[("pods", "default", "test-worker-1")]["metadata"]["deletionTimestamp"] = T
    world.cluster.catch_up()
    assert await world.sync() == "restarted"
    assert world.cluster.status_written()["restartCount"] == 1


async def test_a_job_deleted_while_its_sync_ran_leaves_no_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The delete event (and its forget) arrives while a sync creates the job's pods: what that sync writes to the
    record afterwards (its expectations) does not outlive the job."""
    world = World(new_mpijob(workers=2))
    create = world.cluster.create

    async def deleted_meanwhile(resource: Resource, obj: JSONDict) -> JSONDict:
        if world.caches.mpijobs.get("default", "test") is not None:
            world.caches.mpijobs.delete("default", "test")
            world.reconciler.shared.book.forget("job-uid")
        return await create(resource, obj)

    monkeypatch.setattr(world.cluster, "create", deleted_meanwhile)
    await world.sync()
    assert ("create", "pods", "test-worker-0") in world.cluster.actions
    assert len(world.reconciler.shared.book) == 0
