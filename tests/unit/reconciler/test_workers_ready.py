"""The WorkersReady condition (issue 10): what the slim pod keeps, the cause chosen, when it is written and
which event it emits; and through the sync, that it costs no write of its own but a cause change."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.mpijob import builders
from reconciler.mpijob.caches import slim_pod
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.mpijob.readiness import Readiness, WorkersSeen, assess, set_workers_ready, update_workers_ready
from reconciler.mpijob.status import MAX_MESSAGE, Event, set_condition
from reconciler.runtime.api_resources import PODS
from reconciler.runtime.client import ApiError
from shared.jsondict import JSONDict
from tests.unit.reconciler.test_sync import T, World, condition, created_condition, defaulted, new_mpijob

LATER = "2026-11-29T12:05:00Z"
NO_GPU = ("0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: "
          "4 No preemption victims found for incoming pod.")
QUOTA = 'pods "test-worker-{}" is forbidden: exceeded quota: two-pods, requested: pods=1, used: pods=2, limited: pods=2'


def unschedulable(message: str = NO_GPU) -> JSONDict:
    return {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]}


def waiting(reason: str, message: str = "", phase: str = "Pending") -> JSONDict:
    state: JSONDict = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
    return {"phase": phase, "conditions": [{"type": "PodScheduled", "status": "True"},
                                           {"type": "Ready", "status": "False"}],
            "containerStatuses": [{"name": "sidecar", "state": {"running": {}}}, {"name": "main", "state": state}]}


READY: JSONDict = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


def worker(status: JSONDict, index: int = 0, job: JSONDict | None = None) -> JSONDict:
    pod = builders.build_worker(defaulted(job or new_mpijob(workers=8)), index)
    pod["metadata"]["uid"] = f"worker-{index}"
    pod["status"] = status
    return pod


def slim(status: JSONDict, index: int = 0) -> JSONDict:
    slimmed = slim_pod(worker(status, index))
    assert slimmed is not None
    return slimmed


@pytest.mark.parametrize(("status", "cause"), [
    (unschedulable(), ("Unschedulable", NO_GPU)),
    ({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                          "message": "Scheduling is blocked due to non-empty scheduling gates"}]},
     ("SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")),
    (waiting("ImagePullBackOff", 'Back-off pulling image "mpi-image"'),
     ("ImagePullBackOff", 'Back-off pulling image "mpi-image"')),
    (waiting("ContainerCreating"), ("ContainerCreating", "")),
    ({**waiting("ContainerCreating"), "initContainerStatuses": [
        {"name": "init", "state": {"waiting": {"reason": "CreateContainerConfigError",
                                               "message": 'secret "s" not found'}}}]},
     ("CreateContainerConfigError", 'secret "s" not found')),
    (waiting("CrashLoopBackOff", "back-off 10s restarting", phase="Running"),
     ("CrashLoopBackOff", "back-off 10s restarting")),
    ({"phase": "Pending"}, None),
    (READY, None),
], ids=["unschedulable", "gated", "image pull", "creating", "an error before creating", "crash loop", "nothing yet",
        "ready"])
def test_a_slim_worker_keeps_why_it_is_not_ready(status: JSONDict, cause: tuple[str, str] | None) -> None:
    assert slim(status)["status"].get("cause") == cause


def test_the_cause_strings_are_shared_and_launcher_pods_keep_none() -> None:
    first, second = slim(unschedulable(NO_GPU[:10] + NO_GPU[10:]), 0), slim(unschedulable(), 1)
    assert first["status"]["cause"][1] is second["status"]["cause"][1]
    launcher_pod = {"metadata": {"name": "l", "namespace": "default", "ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "test-launcher", "uid": "u", "controller": True}]},
        "status": unschedulable()}
    assert "cause" not in (slim_pod(launcher_pod) or {})["status"]


def pods(*statuses: JSONDict) -> list[JSONDict]:
    return [slim(status, i) for i, status in enumerate(statuses)]


@pytest.mark.parametrize(("workers", "replicas", "extra", "expected"), [
    (pods(*[READY] * 8), 8, {}, Readiness("True", "WorkersReady", "8/8 workers ready")),
    ([], 0, {}, Readiness("True", "WorkersReady", "0/0 workers ready")),
    (pods(*[READY] * 5, *[unschedulable()] * 3), 8, {},
     Readiness("False", "Unschedulable", f"3/8 workers pending: {NO_GPU}", warning=True)),
    (pods(READY, waiting("ImagePullBackOff", "Back-off"), unschedulable(), {}), 4, {},
     Readiness("False", "Unschedulable", f"3/4 workers pending: {NO_GPU}", warning=True)),
    (pods(READY, waiting("ContainerCreating"), waiting("ErrImagePull", "not found")), 3, {"create_error": "quota"},
     Readiness("False", "ErrImagePull", "2/3 workers pending: ErrImagePull: not found", warning=True)),
    (pods(READY, waiting("ContainerCreating")), 4, {"create_error": QUOTA.format(2)},
     Readiness("False", "CreateFailed", f"3/4 workers pending: {QUOTA.format(2)}", warning=True)),
    (pods(READY, READY), 2, {"create_error": QUOTA.format(2)},
     Readiness("False", "CreateFailed", f"0/2 workers pending: {QUOTA.format(2)}", warning=True)),
    (pods({"phase": "Pending"}, waiting("ContainerCreating"), waiting("ContainerCreating")), 4, {},
     Readiness("False", "ContainerCreating", "4/4 workers pending: ContainerCreating")),
    (pods({"phase": "Pending"}), 2, {"launcher_waits": True},
     Readiness("False", "WorkersStarting",
               "2/2 workers pending: waiting to start (the launcher waits for every worker to be ready)")),
    (pods({"phase": "Running"}, READY), 2, {},
     Readiness("False", "WorkersStarting", "1/2 workers pending: running, not ready yet")),
    (pods({"phase": "Failed"}, {"phase": "Pending"}), 2, {"create_error": "quota"},
     Readiness("False", "WorkerFailed", "2/2 workers pending: failed, and a failed worker is not re-created",
               warning=True)),
], ids=["all ready", "no workers", "unschedulable", "unschedulable first", "image errors before create failures",
        "create failure before starting", "create failure with every existing worker ready", "creating",
        "the launcher waits", "running, not ready", "a failed worker"])
def test_the_most_informative_cause_with_counts(workers: list[JSONDict], replicas: int, extra: dict[str, Any],
                                                expected: Readiness) -> None:
    assert assess(workers, replicas, **extra) == expected


def test_the_most_common_text_of_the_chosen_cause_wins_and_long_messages_are_truncated() -> None:
    other = "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."
    assert assess(pods(unschedulable(other), unschedulable(), unschedulable()), 3).message == (
        f"3/3 workers pending: {NO_GPU}")
    long = assess(pods(unschedulable("x" * 2000)), 1).message
    assert len(long) == MAX_MESSAGE
    assert long.endswith("...")


PENDING = Readiness("False", "Unschedulable", f"3/8 workers pending: {NO_GPU}", warning=True)


def test_the_condition_goes_first_and_upstream_conditions_keep_appending_after_it() -> None:
    status: JSONDict = {"conditions": [created_condition()]}
    event, refresh = set_workers_ready(status, PENDING, T)
    assert (event, refresh) == (Event("Warning", "Unschedulable", PENDING.message), None)
    assert status["conditions"] == [condition("WorkersReady", "False", "Unschedulable", PENDING.message),
                                    created_condition()]
    set_condition(status, "Running", "True", "MPIJobRunning", "MPIJob default/test is running.", T)
    set_condition(status, "Succeeded", "True", "MPIJobSucceeded", "MPIJob default/test successfully completed.", T)
    assert [cond["type"] for cond in status["conditions"]] == ["WorkersReady", "Created", "Running", "Succeeded"]
    ready = Readiness("True", "WorkersReady", "8/8 workers ready")
    assert set_workers_ready(status, ready, LATER) == (Event("Normal", "WorkersReady", "8/8 workers ready"), None)
    assert [cond["type"] for cond in status["conditions"]] == ["WorkersReady", "Created", "Running", "Succeeded"]
    assert status["conditions"][0] == condition("WorkersReady", "True", "WorkersReady", "8/8 workers ready", LATER)


def test_the_same_cause_with_other_counts_is_no_change_but_is_carried_along() -> None:
    status: JSONDict = {"conditions": [condition("WorkersReady", "False", "Unschedulable", PENDING.message),
                                       created_condition()]}
    before = [dict(cond) for cond in status["conditions"]]
    fewer = Readiness("False", "Unschedulable", f"1/8 workers pending: {NO_GPU}", warning=True)
    event, refresh = set_workers_ready(status, fewer, LATER)
    assert event is None, "no event"
    assert status["conditions"] == before, "not written"
    assert refresh == {"type": "WorkersReady", "status": "False", "reason": "Unschedulable", "message": fewer.message,
                       "lastUpdateTime": LATER, "lastTransitionTime": T}
    assert set_workers_ready(status, PENDING, LATER) == (None, None), "nothing to carry: the same message"


def test_a_start_after_an_error_is_recovering_while_carried_along_and_its_all_ready_is_news() -> None:
    status: JSONDict = {"conditions": [condition("WorkersReady", "False", "Unschedulable", PENDING.message)]}
    creating = Readiness("False", "ContainerCreating", "8/8 workers pending: ContainerCreating")
    assert set_workers_ready(status, creating, LATER) == (Event("Normal", "WorkersRecovering", creating.message),
                                                          None)
    assert status["conditions"] == [{**condition("WorkersReady", "False", "WorkersRecovering", creating.message, T),
                                     "lastUpdateTime": LATER}]
    starting = Readiness("False", "WorkersStarting", "3/8 workers pending: running, not ready yet")
    assert set_workers_ready(status, starting, LATER) == (None, {
        "type": "WorkersReady", "status": "False", "reason": "WorkersRecovering",
        "message": "3/8 workers pending: running, not ready yet",
        "lastUpdateTime": LATER, "lastTransitionTime": T}), "not written, and carried along, still recovering"
    assert set_workers_ready(status, creating, LATER) == (None, None), "the same reason and message"
    ready = Readiness("True", "WorkersReady", "8/8 workers ready")
    assert set_workers_ready(status, ready, LATER) == (Event("Normal", "WorkersReady", ready.message), None)
    assert status["conditions"] == [condition("WorkersReady", "True", "WorkersReady", ready.message, LATER)]


def test_a_new_text_of_an_error_cause_is_a_change_but_a_failed_create_of_another_worker_is_not() -> None:
    status: JSONDict = {"conditions": [condition("WorkersReady", "False", "Unschedulable", PENDING.message)]}
    other = Readiness("False", "Unschedulable", "3/8 workers pending: 0/5 nodes are available: 5 Too many pods.",
                      warning=True)
    assert set_workers_ready(status, other, LATER)[0] == Event("Warning", "Unschedulable", other.message)
    assert status["conditions"][0]["lastTransitionTime"] == T, "the status stayed False"
    assert status["conditions"][0]["lastUpdateTime"] == LATER
    refused = Readiness("False", "CreateFailed", f"6/8 workers pending: {QUOTA.format(2)}", warning=True)
    assert set_workers_ready(status, refused, LATER)[0] == Event("Warning", "CreateFailed", refused.message)
    again = Readiness("False", "CreateFailed", f"6/8 workers pending: {QUOTA.format(5)}", warning=True)
    assert set_workers_ready(status, again, LATER)[0] is None


@pytest.mark.parametrize(("old", "new", "event"), [
    (None, Readiness("False", "WorkersStarting", "8/8 workers pending: waiting to start"), None),
    (("False", "WorkersStarting", "8/8 workers pending: waiting to start"),
     Readiness("False", "ContainerCreating", "8/8 workers pending: ContainerCreating"), "no change"),
    (("False", "Unschedulable", PENDING.message),
     Readiness("False", "WorkersStarting", "8/8 workers pending: waiting to start"),
     Event("Normal", "WorkersRecovering", "8/8 workers pending: waiting to start")),
    (("True", "WorkersReady", "8/8 workers ready"),
     Readiness("False", "WorkersStarting", "1/8 workers pending: running, not ready yet"),
     Event("Normal", "WorkersRecovering", "1/8 workers pending: running, not ready yet")),
    (("False", "WorkersRecovering", "1/8 workers pending: running, not ready yet"),
     Readiness("False", "ContainerCreating", "1/8 workers pending: ContainerCreating"), "no change"),
    (("False", "MPIJobSuspended", "MPIJob suspended: workers are released"),
     Readiness("False", "WorkersStarting", "8/8 workers pending: waiting to start"), None),
    (("False", "WorkersStarting", "8/8 workers pending: waiting to start"),
     Readiness("False", "MPIJobSuspended", "MPIJob suspended: workers are released"), None),
    (("True", "WorkersReady", "8/8 workers ready"),
     Readiness("False", "MPIJobFinished", "MPIJob finished: workers are released"), None),
    (("False", "WorkersStarting", "8/8 workers pending: waiting to start"),
     Readiness("False", "SchedulingGated", "8/8 workers pending: gated"), Event("Normal", "SchedulingGated",
                                                                               "8/8 workers pending: gated")),
    (("False", "WorkersStarting", "8/8 workers pending: waiting to start"),
     Readiness("True", "WorkersReady", "8/8 workers ready"), None),
    (("False", "MPIJobSuspended", "MPIJob suspended: workers are released"),
     Readiness("True", "WorkersReady", "8/8 workers ready"), None),
    (("False", "ImagePullBackOff", "8/8 workers pending: ImagePullBackOff: pull failed"),
     Readiness("True", "WorkersReady", "8/8 workers ready"), Event("Normal", "WorkersReady", "8/8 workers ready")),
    (("False", "WorkersRecovering", "2/8 workers pending: ContainerCreating"),
     Readiness("True", "WorkersReady", "8/8 workers ready"), Event("Normal", "WorkersReady", "8/8 workers ready")),
    (("False", "WorkersRecovering", "1/8 workers pending: running, not ready yet"),
     Readiness("True", "WorkersReady", "8/8 workers ready"), Event("Normal", "WorkersReady", "8/8 workers ready")),
], ids=["first, starting", "between generic causes", "from an error to starting", "a worker lost readiness",
        "between causes while recovering", "resumed", "suspended", "finished", "gated", "ready after a plain start",
        "ready after a resume", "ready after an error", "ready after an error, then starting",
        "ready again after losing it"])
def test_which_changes_emit_an_event(old: tuple[str, str, str] | None, new: Readiness,
                                     event: Event | str | None) -> None:
    status: JSONDict = {"conditions": [*([condition("WorkersReady", *old)] if old else []), created_condition()]}
    got, refresh = set_workers_ready(status, new, LATER)
    if event == "no change":
        assert old is not None
        assert got is None
        assert refresh is not None
        assert status["conditions"][0] == condition("WorkersReady", *old)
    else:
        assert (got, refresh) == (event, None)
        assert status["conditions"][0]["reason"] == (event.reason if isinstance(event, Event) else new.reason)


def test_a_job_without_workers_gets_no_condition_and_a_finished_one_says_finished() -> None:
    status: JSONDict = {"conditions": [created_condition()]}
    assert update_workers_ready(status, WorkersSeen([], 0), T) == ([], None)
    assert status == {"conditions": [created_condition()]}
    status["conditions"].append(condition("Succeeded", "True", "MPIJobSucceeded", "done"))
    update_workers_ready(status, WorkersSeen([], 8, suspended=True, clean_pod_policy="None"), T)
    assert status["conditions"][0] == condition("WorkersReady", "False", "MPIJobFinished",
                                                "MPIJob finished: workers are kept (cleanPodPolicy None)")


# Through the sync: writes and events.

def running_job(workers: int = 8, **spec: Any) -> World:
    job = new_mpijob(workers=workers, **spec)
    job["status"] = {"conditions": [created_condition()], "startTime": T}
    world = World(job)
    world.add_dependencies()
    return world


def given_workers(world: World, *statuses: JSONDict) -> None:
    assert world.job is not None
    for index, status in enumerate(statuses):
        world.cluster.given(PODS, worker(status, index, world.job))


def written_back(world: World) -> None:
    """The watch shows the job with the status last written."""
    assert world.job is not None
    world.job["status"] = world.cluster.status_written()
    world.cluster.given(MPIJOBS, world.job)
    world.cluster.catch_up()


async def test_unschedulable_workers_are_written_once_with_one_event() -> None:
    world = running_job(4)
    given_workers(world, READY, unschedulable(), unschedulable(), unschedulable())
    await world.sync()
    assert world.cluster.status_written()["conditions"] == [
        condition("WorkersReady", "False", "Unschedulable", f"3/4 workers pending: {NO_GPU}"), created_condition()]
    assert world.cluster.events == [Event("Warning", "Unschedulable", f"3/4 workers pending: {NO_GPU}")]
    written_back(world)
    await world.sync()
    assert [a for a in world.cluster.actions if a[1] == "mpijobs"] == [("update_status", "mpijobs", "test")]
    assert len(world.cluster.events) == 1, "the same cause: no second event"


async def test_a_worker_getting_ready_changes_only_counts_and_costs_no_write() -> None:
    world = running_job(4)
    given_workers(world, READY, {"phase": "Running"}, unschedulable(), unschedulable())
    await world.sync()
    assert world.cluster.status_written()["conditions"][0]["message"] == f"3/4 workers pending: {NO_GPU}"
    written_back(world)
    writes = len(world.cluster.writes)
    given_workers(world, READY, READY)
    await world.sync()
    assert len(world.cluster.writes) == writes, "2/4 pending now, the same cause: nothing written"
    assert len(world.cluster.events) == 1


async def test_counts_alone_are_not_written_but_ride_along_and_all_ready_is() -> None:
    world = running_job(4, launcherCreationPolicy="WaitForWorkersReady")
    given_workers(world, READY, unschedulable(), unschedulable(), unschedulable())
    await world.sync()
    waits = f"3/4 workers pending: {NO_GPU} (the launcher waits for every worker to be ready)"
    assert world.cluster.status_written()["conditions"][0]["message"] == waits
    assert world.cluster.status_written()["readyWorkers"] == "1/4", "written with the condition's change"
    written_back(world)
    given_workers(world, READY, READY, unschedulable(), {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": NO_GPU}]})
    await world.sync()
    statuses = [a for a in world.cluster.actions if a[1] == "mpijobs"]
    assert statuses == [("update_status", "mpijobs", "test")] * 2, "written for the Running worker's count"
    assert world.cluster.status_written()["conditions"][0] == condition(
        "WorkersReady", "False", "Unschedulable", waits.replace("3/4", "2/4"))
    assert world.cluster.status_written()["replicaStatuses"]["Worker"] == {"active": 2}
    assert world.cluster.status_written()["readyWorkers"] == "2/4", "carried along"
    written_back(world)
    given_workers(world, READY, READY, READY, READY)
    world.publish_workers()
    await world.sync()
    assert ("create", "jobs", "test-launcher") in world.cluster.actions
    assert world.cluster.actions[-1] == ("update_status", "mpijobs", "test")
    assert world.cluster.status_written()["conditions"][0] == condition(
        "WorkersReady", "True", "WorkersReady", "4/4 workers ready")
    assert world.cluster.events[-1] == Event("Normal", "WorkersReady", "4/4 workers ready")
    assert len(world.cluster.events) == 2
    assert world.cluster.status_written()["readyWorkers"] == "4/4"


async def test_the_ready_count_alone_is_not_written() -> None:
    world = running_job(4)
    given_workers(world, READY, {"phase": "Running"}, unschedulable(), unschedulable())
    await world.sync()
    assert world.cluster.status_written()["readyWorkers"] == "1/4"
    written_back(world)
    writes = len(world.cluster.writes)
    world.cluster.given(PODS, worker(READY, 1, world.job))
    await world.sync()
    assert len(world.cluster.writes) == writes, "only the ready count changed (2/4): not written by itself"


@pytest.mark.parametrize("launcher_waits", [False, True])
def test_a_recovering_condition_stays_within_the_message_cap(launcher_waits: bool) -> None:
    """The condition's state is its reason: nothing is appended to a message after it was truncated."""
    status: JSONDict = {"conditions": [condition("WorkersReady", "True", "WorkersReady", "4/4 workers ready")]}
    long_text = "x" * 2 * MAX_MESSAGE
    pods = [worker(waiting("ContainerCreating", long_text, phase="Pending"), i) for i in range(4)]
    events, _ = update_workers_ready(status, WorkersSeen([slim_pod(p) or {} for p in pods], 4,
                                                         launcher_waits=launcher_waits), LATER)
    written = status["conditions"][0]
    assert (written["reason"], len(written["message"])) == ("WorkersRecovering", MAX_MESSAGE)
    assert written["message"].startswith("4/4 workers pending: ContainerCreating: xxx")
    assert events == [Event("Normal", "WorkersRecovering", written["message"])]
    assert status["readyWorkers"] == "0/4"


async def test_a_refused_create_says_why_once_while_each_failed_sync_keeps_its_warning() -> None:
    world = running_job(4)
    given_workers(world, READY, READY)
    world.cluster.failures[("create", "pods", "test-worker-2")] = ApiError(403, "Forbidden", QUOTA.format(2))
    world.cluster.failures[("create", "pods", "test-worker-3")] = ApiError(403, "Forbidden", QUOTA.format(3))
    with pytest.raises(ApiError, match="exceeded quota"):
        await world.sync()
    message = world.cluster.status_written()["conditions"][0]["message"]
    assert message in (f"2/4 workers pending: {QUOTA.format(2)}", f"2/4 workers pending: {QUOTA.format(3)}")
    assert world.cluster.status_written()["conditions"][0]["reason"] == "CreateFailed"
    written_back(world)
    with pytest.raises(ApiError, match="exceeded quota"):
        await world.sync()
    assert [a for a in world.cluster.actions if a[1] == "mpijobs"] == [("update_status", "mpijobs", "test")]
    assert [e.reason for e in world.cluster.events] == ["MPIJobFailed", "CreateFailed", "MPIJobFailed"]
    assert world.cluster.events[1] == Event("Warning", "CreateFailed", message)


async def test_a_job_finished_before_the_condition_existed_is_not_written_for_it() -> None:
    job = new_mpijob(workers=2, runPolicy={"cleanPodPolicy": "None"})
    job["status"] = {"conditions": [created_condition(), condition("Succeeded", "True", "MPIJobSucceeded", "done")],
                     "startTime": T, "completionTime": T}
    world = World(job)
    assert await world.sync() == "finished"
    assert world.cluster.actions == []
    job["status"]["conditions"].insert(0, condition("WorkersReady", "True", "WorkersReady", "2/2 workers ready"))
    world.cluster.given(MPIJOBS, job)
    await world.sync()
    assert world.cluster.status_written()["conditions"][0] == condition(
        "WorkersReady", "False", "MPIJobFinished", "MPIJob finished: workers are kept (cleanPodPolicy None)")
    assert world.cluster.events == []
