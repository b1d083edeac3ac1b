"""Launcher gating (docs/proposals/launcher-gating.md): pure rules, no I/O.

The launcher Job is held suspended while the MPIJob is suspended or, under ``launcherCreationPolicy:
WaitForWorkersReady``, while fewer than all workers are Ready. The rule is evaluated on every sync, so a job
created suspended (every Kueue job) and a running job suspended and resumed are gated again. A launcher already
released is never suspended for readiness (that would kill a running ``mpirun``): only the MPIJob's own suspension
suspends it. ``AtStartup`` jobs are released at once, as upstream.

While a WaitForWorkersReady job waits, its Running condition says so: ``False``, reason ``WaitingForWorkers``,
``k/N workers ready``; once the launcher is released, ``LauncherStarting`` until upstream's ``Running=True``.
The condition keeps its place, or goes before the last one, so the ``State`` column (the last condition) reads
as upstream's. Its ``lastUpdateTime`` is when the wait began: a new count alone does not move it, and is
written only along with another change (as the WorkersReady counts are).

Ready is not enough for ``mpirun``: a worker's name resolves only once the endpoints controller has put it, Ready,
into an EndpointSlice of the job's Service (CoreDNS answers from those, and caches an early NXDOMAIN). So a
WaitForWorkersReady launcher is released (or created) only when every worker is published (``unpublished``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.mpijob.readiness import count_ready, put_in_place
from reconciler.mpijob.status import Observed, find_condition, is_finished, is_true
from shared.api import constants as c
from shared.jsondict import JSONDict

if TYPE_CHECKING:
    from reconciler.mpijob.context import JobFacts

REASON_WAITING_FOR_WORKERS = "WaitingForWorkers"
REASON_LAUNCHER_STARTING = "LauncherStarting"


def workers_ready(workers: list[JSONDict], replicas: int) -> bool:
    """Whether ``replicas`` workers are Running and Ready (no workers: ready, as upstream)."""
    return count_ready(workers) >= replicas


def holds_launcher(facts: JobFacts, workers: list[JSONDict]) -> bool:
    """Whether the launcher Job must stay suspended: the MPIJob is suspended, or it waits for its workers
    (WaitForWorkersReady) and not all of ``workers`` are Ready."""
    if facts.suspended:
        return True
    return not facts.launcher_at_startup and not workers_ready(workers, facts.worker_replicas)


def unpublished(workers: list[JSONDict], slices: list[JSONDict]) -> list[str]:
    """The names of ``workers`` whose DNS name does not resolve yet: no endpoint of the Service's EndpointSlices
    ``slices`` refers to the pod (by UID) with a hostname and not-unready (CoreDNS serves ready endpoints only; an
    unset ``ready`` means ready)."""
    published = {str((endpoint.get("targetRef") or {}).get("uid"))
                 for piece in slices for endpoint in piece.get("endpoints") or []
                 if endpoint.get("hostname") and (endpoint.get("conditions") or {}).get("ready") is not False}
    return [str(pod["metadata"]["name"]) for pod in workers if str(pod["metadata"].get("uid")) not in published]


def is_held(launcher: JSONDict | None) -> bool:
    """Whether the launcher has not been released: no launcher Job yet, or a suspended one."""
    return launcher is None or bool((launcher.get("spec") or {}).get("suspend"))


def waiting_condition(facts: JobFacts, status: JSONDict, seen: Observed) -> JSONDict | None:
    """The Running condition a WaitForWorkersReady job shows while it waits (None: upstream's rules alone).

    Held: ``WaitingForWorkers`` with the ready count. Released after a wait: ``LauncherStarting`` until the
    launcher runs. Not for AtStartup jobs, suspended or finished jobs, nor once Running is True."""
    if facts.launcher_at_startup or facts.suspended or is_finished(status) or is_true(status, c.CONDITION_RUNNING):
        return None
    old = find_condition(status, c.CONDITION_RUNNING)
    replicas = facts.worker_replicas
    ready = min(count_ready(seen.workers), replicas)
    if is_held(seen.launcher):
        reason = REASON_WAITING_FOR_WORKERS
        message = f"MPIJob {facts.key} waits for its workers: {ready}/{replicas} workers ready"
        if ready == replicas:
            message += ", waiting for their names to resolve"
    elif old is not None and old.get("reason") in (REASON_WAITING_FOR_WORKERS, REASON_LAUNCHER_STARTING):
        reason = REASON_LAUNCHER_STARTING
        message = f"MPIJob {facts.key}: {replicas}/{replicas} workers ready, the launcher is starting"
    else:
        return None
    condition = {"type": c.CONDITION_RUNNING, "status": c.CONDITION_FALSE, "reason": reason, "message": message,
                 "lastUpdateTime": facts.now, "lastTransitionTime": facts.now}
    if old is not None and old.get("status") == c.CONDITION_FALSE:
        condition["lastTransitionTime"] = old.get("lastTransitionTime", facts.now)
        if old.get("reason") == reason:
            condition["lastUpdateTime"] = old.get("lastUpdateTime", facts.now)
    return condition


def set_waiting(facts: JobFacts, status: JSONDict, seen: Observed) -> JSONDict | None:
    """Put the waiting condition in ``status`` when its status or reason changed. When only its message (the
    count) changed, ``status`` is left alone and the condition is returned, to write along with another change."""
    condition = waiting_condition(facts, status, seen)
    if condition is None:
        return None
    old = find_condition(status, c.CONDITION_RUNNING) or {}
    if (old.get("status"), old.get("reason")) != (condition["status"], condition["reason"]):
        put_in_place(status, condition)
        return None
    return None if old.get("message") == condition["message"] else condition


def gate_span(before: JSONDict, after: JSONDict) -> tuple[str, str] | None:
    """The (start, end) timestamps of a wait that a status write ended by releasing the launcher: Running went
    from ``WaitingForWorkers`` to ``LauncherStarting`` or True. None for any other write (a job suspended while
    it waited was never released)."""
    old = find_condition(before, c.CONDITION_RUNNING) or {}
    new = find_condition(after, c.CONDITION_RUNNING) or {}
    if old.get("reason") != REASON_WAITING_FOR_WORKERS:
        return None
    released = new.get("reason") == REASON_LAUNCHER_STARTING or new.get("status") == c.CONDITION_TRUE
    if not released or not old.get("lastUpdateTime") or not new.get("lastUpdateTime"):
        return None
    return str(old["lastUpdateTime"]), str(new["lastUpdateTime"])
