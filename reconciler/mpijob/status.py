"""Pure status computation: observed children -> MPIJob status, events and metric increments.

Mirrors upstream's ``updateMPIJobStatus`` and condition semantics (spec/controller.md section 3) with
two deliberate changes: events and counters fire once per transition, not on every sync (upstream
quirk 2), and an eviction ends the job: it sets ``completionTime`` (upstream quirk 3), so the sync that
declares it Failed stops the launcher and cleanup follows (sync.py).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from shared.api import constants as c
from shared.jsondict import JSONDict

MAX_MESSAGE = 1024


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass
class StatusUpdate:
    """What a status computation produced besides the status itself."""

    events: list[Event] = field(default_factory=list)
    succeeded: bool = False  # the job became Succeeded in this computation
    failed: bool = False  # the job became Failed (launcher failure) in this computation


def truncate(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


def find_condition(status: JSONDict, condition_type: str) -> JSONDict | None:
    return next((cond for cond in status.get("conditions") or [] if cond.get("type") == condition_type), None)


def is_true(status: JSONDict, condition_type: str) -> bool:
    cond = find_condition(status, condition_type)
    return cond is not None and cond.get("status") == c.CONDITION_TRUE


def is_finished(status: JSONDict) -> bool:
    return is_true(status, c.CONDITION_SUCCEEDED) or is_true(status, c.CONDITION_FAILED)


def set_condition(  # noqa: PLR0913, PLR0917  upstream's updateMPIJobConditions, argument for argument
        status: JSONDict, condition_type: str, value: str, reason: str, message: str, now: str) -> bool:
    """Upstream's ``updateMPIJobConditions``, with two rules of our own for Restarting: True when the condition
    changed.

    Same type, status and reason: no change (a new message alone is ignored). Same status with a new
    reason keeps lastTransitionTime. The new condition replaces its type's and is appended last. What setting
    it does to the other conditions:

    ===================  =====================  ===========================================  ==============
    condition set        existing condition     here                                         upstream
    ===================  =====================  ===========================================  ==============
    Succeeded or Failed  Running                flipped to False in place                    the same
    Succeeded            Failed                 flipped to False in place                    the same
    Restarting           Running                removed                                      the same
    Running              Restarting             flipped to False in place, reason and        **removed**
                                                message kept (the last restart's cause)
    ===================  =====================  ===========================================  ==============

    The last row is the divergence (docs/proposals/v2.md, "Condition Restarting"): upstream removes Restarting
    when Running is set, which would lose the last restart's cause. Upstream never sets Restarting, so the
    Restarting rows never apply to a job it could run; everything else is upstream's, rule for rule.
    """
    old = find_condition(status, condition_type)
    if old is not None and old.get("status") == value and old.get("reason") == reason:
        return False
    new = {"type": condition_type, "status": value, "reason": reason, "message": message,
           "lastUpdateTime": now, "lastTransitionTime": now}
    if old is not None and old.get("status") == value:
        new["lastTransitionTime"] = old.get("lastTransitionTime", now)
    kept = []
    for cond in status.get("conditions") or []:
        kind = cond.get("type")
        if kind == condition_type or (kind, condition_type) == (c.CONDITION_RUNNING, c.CONDITION_RESTARTING):
            continue
        if (kind, condition_type) == (c.CONDITION_RESTARTING, c.CONDITION_RUNNING):
            kept.append(_settled(cond, now))  # the last restart's cause stays readable (docs/proposals/v2.md)
            continue
        flips = kind == c.CONDITION_RUNNING or (kind == c.CONDITION_FAILED and condition_type == c.CONDITION_SUCCEEDED)
        finishing = condition_type in (c.CONDITION_SUCCEEDED, c.CONDITION_FAILED)
        kept.append({**cond, "status": c.CONDITION_FALSE} if finishing and flips else cond)
    status["conditions"] = [*kept, new]
    return True


def _settled(restarting: JSONDict, now: str) -> JSONDict:
    """A Restarting condition once the new attempt runs: False, its reason and message kept."""
    if restarting.get("status") == c.CONDITION_FALSE:
        return restarting
    return {**restarting, "status": c.CONDITION_FALSE, "lastUpdateTime": now, "lastTransitionTime": now}


def job_condition(job: JSONDict | None, condition_type: str) -> JSONDict | None:
    """A batch/v1 Job condition of the given type whose status is True."""
    for cond in ((job or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == condition_type and cond.get("status") == c.CONDITION_TRUE:
            return dict(cond)
    return None


def launcher_done(launcher: JSONDict | None) -> bool:
    return job_condition(launcher, "Complete") is not None or job_condition(launcher, "Failed") is not None


def phase(pod: JSONDict) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def is_pod_ready(pod: JSONDict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(cond.get("type") == "Ready" and cond.get("status") == c.CONDITION_TRUE for cond in conditions)


@dataclass
class Observed:
    """The children a status computation looks at."""

    launcher: JSONDict | None
    launcher_pods: list[JSONDict]
    workers: list[JSONDict]
    suspended: bool


def compute_status(
    namespace: str, name: str, before: JSONDict, seen: Observed, now: str
) -> tuple[JSONDict, StatusUpdate]:
    """The new status (a copy of ``before`` changed) and the events of the transitions it made."""
    status = copy.deepcopy(before)
    update = StatusUpdate()
    job_ref = f"{namespace}/{name}"
    _suspension(status, seen.suspended, now, update)
    if seen.launcher is not None:
        _launcher(status, job_ref, seen, now, update)
    running_workers = _workers(status, seen.workers, now, update)
    if seen.suspended:
        set_condition(status, c.CONDITION_RUNNING, c.CONDITION_FALSE, c.REASON_SUSPENDED,
                      f"MPIJob {job_ref} is suspended.", now)
    elif (seen.launcher is not None and not is_finished(status) and running_workers == len(seen.workers)
          and sum(phase(p) == "Running" for p in seen.launcher_pods) >= 1):
        message = f"MPIJob {job_ref} is running."
        if set_condition(status, c.CONDITION_RUNNING, c.CONDITION_TRUE, c.REASON_RUNNING, message, now):
            update.events.append(Event("Normal", c.REASON_RUNNING, f"MPIJob {job_ref} is running"))
    if is_finished(status) and find_condition(status, c.CONDITION_RUNNING) is None:
        at = status.get("completionTime") or now
        status.setdefault("conditions", []).append({
            "type": c.CONDITION_RUNNING, "status": c.CONDITION_FALSE, "reason": c.REASON_RUNNING,
            "message": f"MPIJob {job_ref} is finished but Running condition was never set.",
            "lastUpdateTime": at, "lastTransitionTime": at})
    return status, update


def _suspension(status: JSONDict, suspended: bool, now: str, update: StatusUpdate) -> None:
    if suspended:
        if set_condition(status, c.CONDITION_SUSPENDED, c.CONDITION_TRUE, c.REASON_SUSPENDED, "MPIJob suspended", now):
            update.events.append(Event("Normal", c.REASON_SUSPENDED, "MPIJob suspended"))
    elif find_condition(status, c.CONDITION_SUSPENDED) is not None and set_condition(
            status, c.CONDITION_SUSPENDED, c.CONDITION_FALSE, c.REASON_RESUMED, "MPIJob resumed", now):
        update.events.append(Event("Normal", c.REASON_RESUMED, "MPIJob resumed"))
        status["startTime"] = now


def _replica_status(status: JSONDict, replica_type: str) -> JSONDict:
    replica: JSONDict = {}
    status.setdefault("replicaStatuses", {})[replica_type] = replica
    return replica


def _launcher(status: JSONDict, job_ref: str, seen: Observed, now: str, update: StatusUpdate) -> None:
    launcher = seen.launcher or {}
    replica = _replica_status(status, c.LAUNCHER)
    failed = int((launcher.get("status") or {}).get("failed") or 0)
    if failed:
        replica["failed"] = failed
    if job_condition(launcher, "Complete") is not None:
        replica["succeeded"] = 1
        message = f"MPIJob {job_ref} successfully completed."
        if not status.get("completionTime") and (launcher.get("status") or {}).get("completionTime"):
            status["completionTime"] = launcher["status"]["completionTime"]
        if set_condition(status, c.CONDITION_SUCCEEDED, c.CONDITION_TRUE, c.REASON_SUCCEEDED, message, now):
            update.events.append(Event("Normal", c.REASON_SUCCEEDED, message))
            update.succeeded = True
    elif (failed_condition := job_condition(launcher, "Failed")) is not None:
        reason, message = failure_reason(job_ref, failed_condition, seen.launcher_pods)
        if not status.get("completionTime"):
            status["completionTime"] = now
        if set_condition(status, c.CONDITION_FAILED, c.CONDITION_TRUE, reason, message, now):
            update.events.append(Event("Warning", reason, message))
            update.failed = True
    else:
        status["replicaStatuses"][c.LAUNCHER] = unfinished_launcher_status(launcher, seen.launcher_pods)


def unfinished_launcher_status(launcher: JSONDict, launcher_pods: list[JSONDict]) -> JSONDict:
    """The Launcher entry of a launcher Job that has not finished: its failed pods and its Running ones."""
    replica: JSONDict = {}
    failed = int((launcher.get("status") or {}).get("failed") or 0)
    if failed:
        replica["failed"] = failed
    active = sum(phase(p) == "Running" for p in launcher_pods)
    if active:
        replica["active"] = active
    return replica


def failure_reason(job_ref: str, condition: JSONDict, launcher_pods: list[JSONDict]) -> tuple[str, str]:
    """The Failed condition's reason and message, from the launcher Job and its last failed pod (``job_ref``:
    ``namespace/name``)."""
    reason = condition.get("reason") or c.REASON_FAILED
    message = condition.get("message") or f"MPIJob {job_ref} has failed"
    if reason == "BackoffLimitExceeded":
        failed = [p for p in launcher_pods if phase(p) == "Failed"]
        if failed:
            last = max(failed, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""))
            pod_status = last.get("status") or {}
            reason += "/" + str(pod_status.get("reason") or "")
            message = truncate(message + ": " + str(pod_status.get("message") or ""))
    return reason, message


def _workers(status: JSONDict, workers: list[JSONDict], now: str, update: StatusUpdate) -> int:
    replica = _replica_status(status, c.WORKER)
    counts = {"Failed": 0, "Succeeded": 0, "Running": 0}
    evicted = 0
    for pod in workers:
        pod_phase = phase(pod)
        if pod_phase in counts:
            counts[pod_phase] += 1
        if pod_phase == "Failed" and (pod.get("status") or {}).get("reason") == "Evicted":
            evicted += 1
    for key, value in (("failed", counts["Failed"]), ("succeeded", counts["Succeeded"]), ("active", counts["Running"])):
        if value:
            replica[key] = value
    if evicted:
        message = f"{evicted}/{len(workers)} workers are evicted"
        if set_condition(status, c.CONDITION_FAILED, c.CONDITION_TRUE, c.REASON_EVICTED, message, now):
            update.events.append(Event("Warning", c.REASON_EVICTED, message))
        if not status.get("completionTime"):
            status["completionTime"] = now  # so cleanPodPolicy applies (upstream quirk 3)
    return counts["Running"]
