"""The failurePolicy step of a sync (docs/proposals/v2.md, "What a restart does, step by step").

A job with a failurePolicy is at an attempt (``policy_decisions.current_attempt``). While objects of an older
attempt exist, they are deleted and nothing is created. Otherwise the failed pods of the current attempt are
evaluated: the first rule satisfied restarts the job (one status write raising ``restartCount``, the commit
point, then the teardown) or fails it; no rule satisfied, or no failed pod, and the sync goes on as in v2beta1.

``run_failure_policy`` decides and returns a ``PolicyEffect``: the status it wants written and the outcome; it
never writes the status. The sync writes it, then calls ``follow_up`` for what comes after the write.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from reconciler.mpijob import children, gang, indexed_workers, workers
from reconciler.mpijob.context import JobContext
from reconciler.mpijob.metrics import OperatorMetrics
from reconciler.mpijob.outcomes import SyncOutcome
from reconciler.mpijob.policy_decisions import Decision, attempt_label, decide
from reconciler.mpijob.readiness import READY_WORKERS, Readiness, set_workers_ready
from reconciler.mpijob.status import Event, find_condition, is_finished, job_condition, set_condition, truncate
from reconciler.runtime.metadata import is_controlled_by, meta
from shared.api import constants as c
from shared.jsondict import JSONDict

RESTARTING_MESSAGE = "MPIJob restarting: workers are recreated"


@dataclass(frozen=True)
class PolicyEffect:
    """What the failurePolicy decided in one sync: the status to write (a copy of the sync's, with ``restartCount``
    and the decision's conditions) and its events; ``outcome`` None when the sync goes on as in v2beta1
    (``status`` then differs from the sync's only by ``restartCount``). ``judged``: the removed pods the watch
    kept that this decision judged, forgotten once its status is written."""

    status: JSONDict
    outcome: SyncOutcome | None = None  # RESTARTING, RESTARTED or FAILED
    events: tuple[Event, ...] = ()
    judged: tuple[JSONDict, ...] = ()

    @property
    def restart_count(self) -> int:
        """The restartCount to write: the job's attempt, or the next one when it restarts now."""
        return int(self.status["restartCount"])


async def run_failure_policy(ctx: JobContext, status: JSONDict) -> PolicyEffect:
    """Apply the failurePolicy to a job that has one (not while it is suspended or finished): what it decided,
    ``status`` left unchanged. Objects of an older attempt are deleted here, before the status is written; a
    restart's teardown and a failure's stopped launcher come after it (``follow_up``). With no outcome, the
    removed pods the watch kept are forgotten now; with one, once its status is written (not when the sync
    fails: the next one judges them again)."""
    status = {**copy.deepcopy(status), "restartCount": ctx.attempt}
    removed = ctx.record.removed_pods()
    effect = await _decide(ctx, status, removed)
    if effect.outcome is None:
        ctx.record.evaluated(removed)
    return effect


async def follow_up(ctx: JobContext, effect: PolicyEffect, metrics: OperatorMetrics) -> None:
    """What follows the effect's status write: a restart is remembered, counted and its attempt torn down; a
    failure is counted and its launcher stopped (cleanPodPolicy applies in the next sync, as for an evicted
    job)."""
    if effect.outcome == SyncOutcome.RESTARTED:
        ctx.record.restarts = effect.restart_count
        metrics.jobs_restarted.inc()
        await _tear_down(ctx, effect.restart_count)
    elif effect.outcome == SyncOutcome.FAILED:
        metrics.jobs_failed.inc()
        await children.stop_launcher(ctx, children.cached_launcher(ctx))


async def _decide(ctx: JobContext, status: JSONDict, removed: list[JSONDict]) -> PolicyEffect:
    """The effect, ``status`` (the step's copy) changed to what it wants written; older attempts torn down."""
    judged = tuple(removed)
    if ctx.suspended or is_finished(status):  # pods deleted by a suspension are no failures
        return PolicyEffect(status, judged=judged)
    if _older_objects_exist(ctx, ctx.attempt):
        await _tear_down(ctx, ctx.attempt)
        _workers_restarting(ctx, status)
        return PolicyEffect(status, SyncOutcome.RESTARTING, judged=judged)
    decision = _decision(ctx, removed)
    if decision is None:
        return PolicyEffect(status, judged=judged)
    max_restarts = (ctx.failure_policy.max_restarts if ctx.failure_policy else None) or 0
    if decision.action == c.ACTION_RESTART_JOB and ctx.attempt < max_restarts:
        event = _restart(ctx, status, decision)
        return PolicyEffect(status, SyncOutcome.RESTARTED, (event,), judged)
    event = _fail(ctx, status, decision, max_restarts)
    return PolicyEffect(status, SyncOutcome.FAILED, (event,), judged)


def _older(ctx: JobContext, below: int) -> tuple[JSONDict | None, list[JSONDict], JSONDict | None]:
    """The launcher Job, workers and worker Job (IndexedJob) of attempts before ``below`` (terminating ones
    included); a worker Job's pods go with it."""
    launcher = children.cached_launcher(ctx)
    if launcher is not None and (not is_controlled_by(launcher, ctx.uid) or attempt_label(launcher) >= below):
        launcher = None
    if ctx.indexed:
        worker_job = indexed_workers.worker_job(ctx)
        return launcher, [], worker_job if worker_job is not None and attempt_label(worker_job) < below else None
    return launcher, [p for p in workers.owned_workers(ctx) if attempt_label(p) < below], None


def _older_objects_exist(ctx: JobContext, below: int) -> bool:
    launcher, old_workers, worker_job = _older(ctx, below)
    return launcher is not None or bool(old_workers) or worker_job is not None


async def _tear_down(ctx: JobContext, below: int) -> None:
    """Delete the PodGroup, and the launcher Job and worker Job (both in the foreground: their names are reused
    only once their pods are gone) and workers of attempts before ``below``; the SSH Secret, the ConfigMap and the
    Service stay. Objects already terminating are left to finish."""
    if ctx.shared.settings.gang is not None:
        await gang.delete_pod_group(ctx)
    launcher, old_workers, worker_job = _older(ctx, below)
    if launcher is not None:
        await children.delete_launcher(ctx, launcher)
    if worker_job is not None:
        await indexed_workers.delete_worker_job(ctx, worker_job, indexed_workers.FOREGROUND)
    await workers.delete_all(ctx, old_workers)


def _decision(ctx: JobContext, removed: list[JSONDict]) -> Decision | None:
    """The rule that decides on the current attempt's failed pods, those the watch saw removed included: none
    once its launcher Job completed or ran out of time (a restart never extends a deadline), as v2beta1 then
    ends the job. Only pods this job controls count: workers controlled by its UID (or by its current worker Job),
    launcher pods by its current launcher Job's (never a same-named predecessor's)."""
    launcher = children.cached_launcher(ctx)
    if launcher is not None and not is_controlled_by(launcher, ctx.uid):
        launcher = None
    failed = job_condition(launcher, "Failed")
    if job_condition(launcher, "Complete") is not None or (failed or {}).get("reason") == "DeadlineExceeded":
        return None
    launcher_uid = str(meta(launcher).get("uid", "")) if launcher is not None else None
    pods = [(c.ROLE_WORKER, p) for p in [*workers.owned_workers(ctx), *_roles(removed, c.ROLE_WORKER)]
            if attempt_label(p) == ctx.attempt and _indexed(ctx, p) and workers.is_job_worker(ctx, p)]
    pods += [(c.ROLE_LAUNCHER, p) for p in children.launcher_pods(ctx, launcher)]
    pods += [(c.ROLE_LAUNCHER, p) for p in _roles(removed, c.ROLE_LAUNCHER)
             if attempt_label(p) == ctx.attempt and launcher_uid is not None and is_controlled_by(p, launcher_uid)]
    return decide(ctx.failure_policy, pods) if ctx.failure_policy is not None else None


def _roles(pods: list[JSONDict], role: str) -> list[JSONDict]:
    return [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(c.LABEL_JOB_ROLE) == role]


def _indexed(ctx: JobContext, pod: JSONDict) -> bool:
    """A worker of an index below ``replicas`` (one removed by a scale-down is no failure)."""
    index = workers.index_of(ctx, pod)
    return index is not None and index < ctx.worker_replicas


def _workers_restarting(ctx: JobContext, status: JSONDict) -> None:
    """WorkersReady False with reason MPIJobRestarting, and no worker ready, while the workers are recreated."""
    if not ctx.worker_replicas and find_condition(status, c.CONDITION_WORKERS_READY) is None:
        return
    set_workers_ready(status, Readiness(c.CONDITION_FALSE, c.REASON_RESTARTING, RESTARTING_MESSAGE), ctx.now)
    status[READY_WORKERS] = f"0/{ctx.worker_replicas}"


def _restart(ctx: JobContext, status: JSONDict, decision: Decision) -> Event:
    """The commit point's status (restartCount raised, Restarting, Running removed, startTime unset) and its
    event; the next attempt starts as a resumed job once the old objects are gone."""
    attempt = ctx.attempt + 1
    max_restarts = ctx.failure_policy.max_restarts if ctx.failure_policy else 0
    message = truncate(f'restart {attempt}/{max_restarts} by rule "{decision.rule}": {decision.culprit}')
    status["restartCount"] = attempt
    # a restart before the last one's attempt ran: a new condition, not the old one's message kept
    status["conditions"] = [cond for cond in status.get("conditions") or []
                            if cond.get("type") != c.CONDITION_RESTARTING]
    set_condition(status, c.CONDITION_RESTARTING, c.CONDITION_TRUE, c.REASON_RESTART_JOB, message, ctx.now)
    status.pop("startTime", None)  # set again when the next attempt starts
    _workers_restarting(ctx, status)
    return Event("Warning", c.REASON_RESTART_JOB, message)


def _fail(ctx: JobContext, status: JSONDict, decision: Decision, max_restarts: int) -> Event:
    """Failed with the rule's reason (and completionTime), and its event."""
    job_ref = f"{ctx.namespace}/{ctx.name}"
    if decision.action == c.ACTION_FAIL_JOB:
        reason = c.REASON_FAIL_JOB
        message = f'MPIJob {job_ref} has failed by rule "{decision.rule}": {decision.culprit}'
    else:
        reason = c.REASON_REACHED_MAX_RESTARTS
        message = (f"MPIJob {job_ref} has failed: reached maxRestarts ({max_restarts}), "
                   f'rule "{decision.rule}": {decision.culprit}')
    message = truncate(message)
    set_condition(status, c.CONDITION_FAILED, c.CONDITION_TRUE, reason, message, ctx.now)
    status.setdefault("completionTime", ctx.now)
    return Event("Warning", reason, message)
