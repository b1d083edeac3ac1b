"""The WorkersReady condition: whether every worker is Ready and, while some are not, why (issue 10).

Not an upstream condition, so it never disturbs upstream's: it is kept first in ``status.conditions``
(the ``State`` printer column shows the last condition), and upstream's conditions keep being appended
after it. While workers are not ready it names the single most informative cause among them, with
counts: ``3/8 workers pending: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu.``.

Writes stay rare: only a change of the cause (its reason, or the text of an error cause), of the status,
and the final all-ready are written at once, with one event. A change of the counts alone, or between
the generic "starting" causes, is only carried along when the status is written anyway.

What the condition remembers is in its reason, never parsed back from its message: workers that start
again after an error or after being ready are ``WorkersRecovering`` (not ``WorkersStarting`` or
``ContainerCreating``) until they are all ready, so that all-ready is news (an event), also after a restart.
``status.readyWorkers`` (``2/8``, the ``Ready`` printer column) counts the ready workers.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace

from reconciler.mpijob.status import Event, find_condition, is_finished, is_pod_ready, phase, truncate
from shared.api import constants as c
from shared.jsondict import JSONDict

FIRST_START = frozenset({c.REASON_WORKERS_STARTING, c.REASON_CONTAINER_CREATING})
GENERIC = FIRST_START | {c.REASON_WORKERS_RECOVERING}  # progress, not news
READY_WORKERS = "readyWorkers"  # status field: ready workers out of the replicas, e.g. "2/8" (the Ready column)
# upstream's own events say these (a restart: the failurePolicy's own Warning event)
RELEASED = frozenset({c.REASON_SUSPENDED, c.REASON_FINISHED, c.REASON_RESTARTING})
_SCHEDULER = frozenset({c.REASON_UNSCHEDULABLE, "SchedulerError"})  # PodScheduled=False reasons but the gate
_CREATING = frozenset({c.REASON_CONTAINER_CREATING, c.REASON_POD_INITIALIZING})
_COUNTS = re.compile(r"^\d+/\d+ workers (?:pending|ready)(?:: )?")
_WORKER_NAME = re.compile(r"-worker-\d+\b")
_IDENTITY_LENGTH = 900  # a cause is the same when its text agrees this far (truncation cuts the rest)


@dataclass(frozen=True)
class Readiness:
    """What the condition says."""

    status: str
    reason: str
    message: str
    warning: bool = False  # an error the user must act on: a Warning event

    @property
    def cause(self) -> str:
        return cause_of(self.reason, self.message)


def cause_of(reason: str, message: str) -> str:
    """A condition message without its counts (a failed create's worker name neither): what names the cause."""
    text = _COUNTS.sub("", message, count=1)
    if reason == c.REASON_CREATE_FAILED:  # which of the refused creates answered first varies
        text = _WORKER_NAME.sub("-worker-N", text)
    return text[:_IDENTITY_LENGTH]


def _pod_cause(pod: JSONDict) -> tuple[int, str, str]:
    """(rank, reason, text) of a worker that is not ready; the lowest rank is the most informative."""
    status = pod.get("status") or {}
    reason, message = status.get("cause") or ("", "")
    if reason in _SCHEDULER:
        return 0, reason, message or reason
    if reason == c.REASON_SCHEDULING_GATED:
        return 3, reason, message or reason
    if reason in _CREATING:
        return 4, c.REASON_CONTAINER_CREATING, f"{reason}: {message}" if message else reason
    if reason:  # a container waits on an error: ImagePullBackOff, ErrImagePull, CreateContainerConfigError...
        return 1, reason, f"{reason}: {message}" if message else reason
    if phase(pod) == "Failed":  # upstream never re-creates a failed worker (restartPolicy Never)
        return 1, c.REASON_WORKER_FAILED, "failed, and a failed worker is not re-created"
    text = {"Running": "running, not ready yet", "Succeeded": "exited"}
    return 5, c.REASON_WORKERS_STARTING, text.get(phase(pod), "waiting to start")


def assess(workers: list[JSONDict], replicas: int, *, create_error: str | None = None,
           launcher_waits: bool = False) -> Readiness:
    """The condition for the workers of indexes 0..replicas-1 (``workers``; those missing are pending).

    ``create_error`` is the API's message when it refused a worker create; ``launcher_waits`` says the
    launcher is not created until every worker is ready (launcherCreationPolicy WaitForWorkersReady)."""
    ready = count_ready(workers)
    if ready >= replicas and create_error is None:
        return Readiness(c.CONDITION_TRUE, c.REASON_WORKERS_READY, f"{replicas}/{replicas} workers ready")
    causes = [_pod_cause(p) for p in workers if not (phase(p) == "Running" and is_pod_ready(p))]
    if create_error is not None:
        causes.append((2, c.REASON_CREATE_FAILED, create_error))
    if not causes:  # fewer pods than replicas, none refused: being created
        causes.append((5, c.REASON_WORKERS_STARTING, "waiting to start"))
    best = min(rank for rank, _, _ in causes)
    (reason, text), _ = Counter((r, t) for rank, r, t in causes if rank == best).most_common(1)[0]
    message = f"{replicas - ready}/{replicas} workers pending: {text}"
    if launcher_waits:
        message += " (the launcher waits for every worker to be ready)"
    return Readiness(c.CONDITION_FALSE, reason, truncate(message), warning=best <= 2)


def count_ready(workers: list[JSONDict]) -> int:
    return sum(phase(p) == "Running" and is_pod_ready(p) for p in workers)


def released(suspended: bool, clean_pod_policy: str) -> Readiness:
    """The condition of a suspended or finished job, whose workers are (or, by policy, are not) deleted."""
    if suspended:
        return Readiness(c.CONDITION_FALSE, c.REASON_SUSPENDED, "MPIJob suspended: workers are released")
    if clean_pod_policy == c.CLEAN_POD_POLICY_NONE:
        return Readiness(c.CONDITION_FALSE, c.REASON_FINISHED,
                         "MPIJob finished: workers are kept (cleanPodPolicy None)")
    return Readiness(c.CONDITION_FALSE, c.REASON_FINISHED, "MPIJob finished: workers are released")


def _changed(old: JSONDict | None, new: Readiness) -> bool:
    """Whether the condition must be written now: a new status, a new reason (but from one generic cause to
    the other), or a new text of a cause that is not generic."""
    if old is None or old.get("status") != new.status:
        return True
    reason = str(old.get("reason") or "")
    if reason != new.reason:
        return not (reason in GENERIC and new.reason in GENERIC)
    return new.reason not in GENERIC and cause_of(reason, str(old.get("message") or "")) != new.cause


def _first_start(old: JSONDict | None) -> bool:
    """Whether the workers are starting for the first time (after creation or a resume): no condition yet, a
    released one, or a generic cause that followed neither an error nor readiness."""
    return old is None or old.get("reason") in RELEASED or old.get("reason") in FIRST_START


def _event(old: JSONDict | None, new: Readiness) -> Event | None:
    """One event per written change; none for suspended and finished (upstream's events say so), nor for the
    workers starting when they start for the first time, nor for their becoming ready after such a start: a
    job that never had a problem keeps upstream's events exactly (and its writes)."""
    if new.reason in RELEASED:
        return None
    if _first_start(old) and (new.reason in GENERIC or new.status == c.CONDITION_TRUE):
        return None
    return Event("Warning" if new.warning else "Normal", new.reason, new.message)


def _with_history(old: JSONDict | None, new: Readiness) -> Readiness:
    """A generic cause that follows an error or readiness is ``WorkersRecovering``, kept while the workers stay
    in generic causes: that is how a later all-ready knows it is news (it gets its event)."""
    if new.reason not in GENERIC or _first_start(old):
        return new
    return replace(new, reason=c.REASON_WORKERS_RECOVERING)


def set_workers_ready(status: JSONDict, new: Readiness, now: str) -> tuple[Event | None, JSONDict | None]:
    """Put the condition first in ``status`` when it changed (with its event). When it did not, the status is
    left alone and the returned condition is the up-to-date one to write if the status is written anyway."""
    old = find_condition(status, c.CONDITION_WORKERS_READY)
    new = _with_history(old, new)
    condition = {"type": c.CONDITION_WORKERS_READY, "status": new.status, "reason": new.reason,
                 "message": new.message, "lastUpdateTime": now, "lastTransitionTime": now}
    if old is not None and old.get("status") == new.status:
        condition["lastTransitionTime"] = old.get("lastTransitionTime", now)
    if not _changed(old, new):
        same = old is not None and (old.get("reason"), old.get("message")) == (new.reason, new.message)
        return None, None if same else condition
    put_first(status, condition)
    return _event(old, new), None


def put_in_place(status: JSONDict, condition: JSONDict) -> None:
    """``condition`` in place of the one of its type; a new one goes before the last condition, so the last
    (the ``State`` column) stays upstream's."""
    conditions = list(status.get("conditions") or [])
    for index, existing in enumerate(conditions):
        if existing.get("type") == condition.get("type"):
            conditions[index] = condition
            break
    else:
        conditions.insert(max(len(conditions) - 1, 0), condition)
    status["conditions"] = conditions


def put_first(status: JSONDict, condition: JSONDict) -> None:
    """``condition`` in place of the one of its type, first in the list."""
    others = [cond for cond in status.get("conditions") or [] if cond.get("type") != condition.get("type")]
    status["conditions"] = [condition, *others]


@dataclass(frozen=True)
class WorkersSeen:
    """What the condition is computed from, besides the status (which says whether the job finished)."""

    workers: list[JSONDict]
    replicas: int
    suspended: bool = False
    clean_pod_policy: str = c.CLEAN_POD_POLICY_NONE
    launcher_waits: bool = False
    create_error: str | None = None


@dataclass(frozen=True)
class CarriedAlong:
    """The up-to-date condition and ready count, written only along with another change of the status."""

    condition: JSONDict | None
    ready_workers: str | None
    running: JSONDict | None = None  # the Running condition of a gated job with a new count (gating.py)

    def apply(self, status: JSONDict) -> None:
        if self.condition is not None:
            put_first(status, self.condition)
        if self.ready_workers is not None:
            status[READY_WORKERS] = self.ready_workers
        if self.running is not None:
            put_in_place(status, self.running)


def update_workers_ready(status: JSONDict, seen: WorkersSeen, now: str) -> tuple[list[Event], CarriedAlong | None]:
    """Set the condition in ``status`` (see ``set_workers_ready``) and, when the condition changed, the ready count:
    its events, and what to write if the status is written anyway. A job without workers gets neither (unless it
    had workers before)."""
    if not seen.replicas and find_condition(status, c.CONDITION_WORKERS_READY) is None:
        return [], None
    ready: int | None = 0
    if is_finished(status) or seen.suspended:
        suspended = seen.suspended and not is_finished(status)
        readiness = released(suspended, seen.clean_pod_policy)
        if not suspended and seen.clean_pod_policy == c.CLEAN_POD_POLICY_NONE:
            ready = None  # the workers are kept: their last count stays
    else:
        readiness = assess(seen.workers, seen.replicas, create_error=seen.create_error,
                           launcher_waits=seen.launcher_waits)
        ready = min(count_ready(seen.workers), seen.replicas)
    old = find_condition(status, c.CONDITION_WORKERS_READY)
    written = _changed(old, _with_history(old, readiness))
    event, refresh = set_workers_ready(status, readiness, now)
    count = f"{ready}/{seen.replicas}" if ready is not None else None
    if written and count is not None:
        status[READY_WORKERS] = count
    elif count == status.get(READY_WORKERS):
        count = None
    carried = CarriedAlong(refresh, count) if refresh is not None or count is not None else None
    return ([event] if event is not None else []), carried
