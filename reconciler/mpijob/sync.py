"""One MPIJob's reconcile, in upstream's order (spec/controller.md section 1.2).

``Reconciler._reconcile`` reads like a table of contents: a finished job is cleaned up, a job that cannot
run is refused, a job with a failurePolicy gets its decision (``restarts.py``: restarting, restarted or failed,
its status returned, not written), any other gets every child ensured (``children.py``, ``workers.py``,
``gang.py``), then the status its children show is computed (``next_status``: pure, WorkersReady included) and
written once. Each ends with a ``SyncOutcome`` (``outcomes.py``). A sync
reads only from the caches, writes through the ``Cluster`` seam, writes the status at most once and only when
it changed, and emits the events of a status change only after that write succeeded.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from reconciler.mpijob import builders, children, gang, gating, restarts, workers
from reconciler.mpijob.cluster import record_events
from reconciler.mpijob.context import JobContext, JobFacts, Shared, job_context
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.mpijob.errors import CreateFailedError, ResourceExistsError
from reconciler.mpijob.metrics import OperatorMetrics
from reconciler.mpijob.outcomes import SyncOutcome, managed_by
from reconciler.mpijob.readiness import CarriedAlong, WorkersSeen, update_workers_ready
from reconciler.mpijob.status import (
    Event,
    Observed,
    StatusUpdate,
    compute_status,
    find_condition,
    is_finished,
    launcher_done,
    set_condition,
    truncate,
    unfinished_launcher_status,
)
from reconciler.runtime.client import ApiError
from shared.api import FieldError, aggregate, defaulted_dict, parse_mpijob, validate_upstream
from shared.api import constants as c
from shared.api.v2_spec_annotation import annotation_errors
from shared.api.worker_backend_validation import indexed_job_errors
from shared.jsondict import JSONDict, object_at

logger = logging.getLogger("reconciler")


def _without_counts(status: JSONDict) -> JSONDict:
    return {key: value for key, value in status.items() if key != "replicaStatuses"}


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Reconciler:
    shared: Shared  # the caches, the cluster, the settings and the rest, for every sync
    metrics: OperatorMetrics
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    async def sync(self, key: str) -> str:
        """Reconcile the MPIJob ``namespace/name``; returns what happened (a ``SyncOutcome``, or ``managed_by``'s
        string for a job another controller manages), raises to be retried."""
        parts = key.split("/")
        if len(parts) != 2:
            return SyncOutcome.INVALID_KEY
        cached = self.shared.caches.mpijobs.get(parts[0], parts[1])
        if cached is None:
            return SyncOutcome.NOT_FOUND
        manager = _managed_by(cached)
        if manager is not None and manager != c.MANAGED_BY_MPI_OPERATOR:
            return managed_by(manager)
        if (cached.get("metadata") or {}).get("deletionTimestamp"):
            return SyncOutcome.DELETING
        # Stored jobs are judged by upstream's rules only: a job the Go operator accepted (created before a
        # handover, or where the webhook is not called) runs as upstream runs it. Our stricter rules are the
        # webhook's, at admission, where the user can still fix the YAML.
        job, errors = parse_mpijob(defaulted_dict(cached))
        if job is None or (errors := validate_upstream(job) or annotation_errors(cached)):
            await record_events(self.shared.cluster, cached, [_validation_event(errors)], rfc3339(self.clock()))
            return SyncOutcome.INVALID
        ctx = job_context(job, cached, rfc3339(self.clock()), self.shared)
        try:
            return await self._reconcile(ctx)
        except ResourceExistsError as error:
            await ctx.event(error.event)
            raise
        finally:
            self._forget_if_deleted(ctx)

    def _forget_if_deleted(self, ctx: JobContext) -> None:
        """A job deleted while its sync ran was forgotten then: what the sync wrote to its record since goes too."""
        cached = self.shared.caches.mpijobs.get(ctx.namespace, ctx.name)
        if cached is None or (cached.get("metadata") or {}).get("uid") != ctx.uid:
            self.shared.book.forget(ctx.uid)

    async def _reconcile(self, ctx: JobContext) -> SyncOutcome:
        """A finished job is only cleaned up; a job that cannot run is refused; a job its failurePolicy restarts or
        fails gets that decision's status; any other gets every child ensured, then the status its children show
        (WorkersReady included, computed purely) written once, if it changed."""
        before = ctx.cached.get("status") or {}
        status, events = _with_created_condition(ctx, before)
        if is_finished(status) and status.get("completionTime"):
            return await self._finish(ctx, before, status, events)
        if errors := _errors_before_children(ctx, self.shared.settings.cluster_domain):
            return await self._refuse(ctx, before, status, events, _validation_event(errors))
        if ctx.failure_policy is not None:
            effect = await restarts.run_failure_policy(ctx, status)
            if effect.outcome is not None:
                return await self._apply_policy(ctx, before, events, effect) or effect.outcome
            status = effect.status  # restartCount
        _set_start_time(ctx, status)
        try:
            seen = await self._ensure_children(ctx, first_sync=not before.get("conditions"))
        except CreateFailedError as failure:
            await self._report_create_failure(ctx, before, status, events, failure)
            raise failure.error from None
        new = next_status(ctx, status, seen)
        if gone := await self._write_status(ctx, before, new.status, [*events, *new.events], new.carried):
            return gone
        if is_finished(new.status) and not launcher_done(seen.launcher):  # evicted workers ended the job
            await children.stop_launcher(ctx, seen.launcher)
        self._count(ctx, seen.launcher, new.update)
        return SyncOutcome.SYNCED

    async def _apply_policy(self, ctx: JobContext, before: JSONDict, events: list[Event],
                            effect: restarts.PolicyEffect) -> SyncOutcome | None:
        """The failurePolicy's decision: its status written (a restart's commit point), then what follows that
        write; the pods it judged are forgotten (not when a step fails: the next sync judges them again).
        Returns DELETED when the job is gone, else None."""
        gone = await self._write_status(ctx, before, effect.status, [*events, *effect.events])
        if gone is None:
            await restarts.follow_up(ctx, effect, self.metrics)
        ctx.record.evaluated(list(effect.judged))
        return gone

    async def _finish(self, ctx: JobContext, before: JSONDict, status: JSONDict,
                      events: list[Event]) -> SyncOutcome:
        """A finished job: a launcher still running is stopped, workers are deleted per cleanPodPolicy, and
        WorkersReady says so (on jobs that have it); nothing is created."""
        await self._stop_launcher(ctx, status)
        if ctx.clean_pod_policy in (c.CLEAN_POD_POLICY_ALL, c.CLEAN_POD_POLICY_RUNNING):
            await self._clean_up(ctx, finished=True)
            status.setdefault("replicaStatuses", {})[c.WORKER] = {}
        if find_condition(status, c.CONDITION_WORKERS_READY) is not None:  # not added to jobs finished before it
            events = [*events, *_workers_ready(ctx, status, [])[0]]
        if gone := await self._write_status(ctx, before, status, events):
            return gone
        await self._expire_stopped_launcher(ctx, str(status["completionTime"]))
        return SyncOutcome.FINISHED

    async def _expire_stopped_launcher(self, ctx: JobContext, completion_time: str) -> None:
        """The launcher Job this process stopped is deleted once ``ttlSecondsAfterFinished`` has passed since the
        job's completionTime (as upstream's finished launcher is by the TTL controller); until then the job's
        sync is requeued for the time left."""
        launcher = children.cached_launcher(ctx)
        left = children.seconds_to_launcher_expiry(ctx, launcher, completion_time)
        if launcher is None or left is None:
            return
        if left > 0:
            self.shared.requeue(ctx.key, left)
            return
        await children.delete_launcher(ctx, launcher)

    async def _refuse(self, ctx: JobContext, before: JSONDict, status: JSONDict, events: list[Event],
                      why: Event) -> SyncOutcome:
        """A job that cannot run as specified ends at once, no child created: Failed with the reason and message
        of ``why``, which is also its event."""
        set_condition(status, c.CONDITION_FAILED, c.CONDITION_TRUE, why.reason, why.message, ctx.now)
        status["completionTime"] = ctx.now
        status.setdefault("replicaStatuses", {})[c.WORKER] = {}  # none was ever created
        events = [*events, why, *_workers_ready(ctx, status, [])[0]]
        return await self._write_status(ctx, before, status, events) or SyncOutcome.REFUSED

    async def _ensure_children(self, ctx: JobContext, first_sync: bool) -> Observed:
        """Every child in upstream's order (1.2 steps 10-13), and a suspended job's workers and PodGroup deleted;
        what the launcher Job, its pods and the workers show. The launcher Job is held suspended while the job
        is suspended or waits for its workers and their names in DNS (gating.py), re-evaluated here on every sync."""
        launcher = await children.find_launcher(ctx, first_sync)
        worker_pods: list[JSONDict] = []
        gang_ready = True  # no pod is made (nor a launcher resumed) while a native gang is being replaced
        if not launcher_done(launcher):
            await children.ensure_service(ctx)
            await children.ensure_config_map(ctx)
            await children.ensure_secret(ctx)
            if not ctx.suspended:
                if self.shared.settings.gang is not None:
                    gang_ready = await gang.ensure_pod_group(ctx)
                worker_pods = await workers.ensure_workers(ctx, create=gang_ready)
            if launcher is None and gang_ready and (ctx.launcher_at_startup or (
                    workers.all_ready(worker_pods) and await children.worker_names_resolve(ctx, worker_pods))):
                launcher = await children.create_launcher(ctx)
        if launcher is not None and gang_ready:
            hold = gating.holds_launcher(ctx, worker_pods)
            if not hold and not ctx.launcher_at_startup and gating.is_held(launcher):
                hold = not await children.worker_names_resolve(ctx, worker_pods)
            launcher = await children.sync_launcher_suspension(ctx, launcher, hold=hold)
        if ctx.suspended:
            await self._clean_up(ctx)
        return Observed(launcher, children.launcher_pods(ctx, launcher), worker_pods, ctx.suspended)

    @staticmethod
    async def _stop_launcher(ctx: JobContext, status: JSONDict) -> None:
        """A finished job whose launcher has not finished (evicted workers ended it): the launcher is stopped (again,
        if the sync that ended the job was interrupted before), and its entry counts the pods it still has."""
        launcher = children.cached_launcher(ctx)
        if launcher is None or launcher_done(launcher):
            return
        launcher = await children.stop_launcher(ctx, launcher)
        entry = unfinished_launcher_status(launcher or {}, children.launcher_pods(ctx, launcher))
        status.setdefault("replicaStatuses", {})[c.LAUNCHER] = entry

    async def _clean_up(self, ctx: JobContext, *, finished: bool = False) -> None:
        """Workers per cleanPodPolicy, and the PodGroup (finished or suspended jobs)."""
        await workers.clean_up(ctx, finished=finished)
        if self.shared.settings.gang is not None:
            await gang.delete_pod_group(ctx)

    async def _report_create_failure(self, ctx: JobContext, before: JSONDict, status: JSONDict, events: list[Event],
                                     failure: CreateFailedError) -> None:
        """The WorkersReady condition says which create the API refused and why; the sync fails as before, with
        the API's error (a failed write of this status is only logged)."""
        launcher_waits = not ctx.launcher_at_startup and gating.is_held(children.cached_launcher(ctx))
        ready_events, _ = _workers_ready(ctx, status, failure.existing, launcher_waits=launcher_waits,
                                         create_error=failure.error.message)
        try:
            await self._write_status(ctx, before, status, [*events, *ready_events])
        except ApiError as error:
            logger.info("status not written", extra={"kv": {"key": ctx.key, "error": str(error)}})

    async def _write_status(self, ctx: JobContext, before: JSONDict, status: JSONDict, events: list[Event],
                            carried: CarriedAlong | None = None) -> SyncOutcome | None:
        """One status write, only on change, with the resourceVersion read (a conflict is retried); a change of
        worker counts alone is spaced out by the settler. ``carried`` is the up-to-date WorkersReady condition and ready
        count, written only along with another change. Returns DELETED when the job is gone, else None (go on)."""
        if status != before:
            progress_only = _without_counts(status) == _without_counts(before)
            if progress_only and self.shared.settler.postpone(ctx.key, ctx.record.settled, "status"):
                return None
            if carried is not None:
                carried.apply(status)
            try:
                await self.shared.cluster.replace_status(MPIJOBS, {**ctx.cached, "status": status})
            except ApiError as error:
                if error.not_found:
                    return SyncOutcome.DELETED  # nothing left to report on: done
                raise
            self.shared.settler.wrote(ctx.record.settled, "status")
            self.metrics.observe_written(ctx.cached, before, status)
            if any(e.reason == c.REASON_CREATED for e in events):
                self.metrics.jobs_created.inc()
        await ctx.event(*events)
        return None

    def _count(self, ctx: JobContext, launcher: JSONDict | None, update: StatusUpdate) -> None:
        """The job's job_info series (once it has a launcher), and the transitions this sync wrote."""
        if launcher is not None:
            self.metrics.job_info.labels(launcher["metadata"]["name"], ctx.namespace).set(1)
        self.metrics.count(update)


@dataclass(frozen=True)
class NextStatus:
    """The status the children show, with its events (WorkersReady's first), the WorkersReady condition and ready
    count to write only along with another change (``carried``), and the transitions the metrics count."""

    status: JSONDict
    events: list[Event]
    carried: CarriedAlong | None
    update: StatusUpdate


def next_status(facts: JobFacts, status: JSONDict, seen: Observed) -> NextStatus:
    """Pure: the new status (a copy of ``status`` changed) from what the children show, WorkersReady included."""
    status, update = compute_status(facts.namespace, facts.name, status, seen, facts.now)
    ready_events, carried = _workers_ready(facts, status, seen.workers, launcher_waits=gating.is_held(seen.launcher))
    running = gating.set_waiting(facts, status, seen)
    if running is not None:
        carried = CarriedAlong(carried.condition if carried else None, carried.ready_workers if carried else None,
                               running)
    return NextStatus(status, [*ready_events, *update.events], carried, update)


def _with_created_condition(facts: JobFacts, status: JSONDict) -> tuple[JSONDict, list[Event]]:
    """A copy of the status, with the Created condition (and its event) if it has no condition yet."""
    status = copy.deepcopy(status)
    if status.get("conditions"):
        return status, []
    message = f"MPIJob {facts.namespace}/{facts.name} is created."
    set_condition(status, c.CONDITION_CREATED, c.CONDITION_TRUE, c.REASON_CREATED, message, facts.now)
    return status, [Event("Normal", c.REASON_CREATED, message)]


def _set_start_time(facts: JobFacts, status: JSONDict) -> None:
    """``startTime`` is set once, when the job first runs (a suspended job has not started)."""
    if not status.get("startTime") and not facts.suspended:
        status["startTime"] = facts.now


def _workers_ready(facts: JobFacts, status: JSONDict, worker_pods: list[JSONDict], *, launcher_waits: bool = False,
                   create_error: str | None = None) -> tuple[list[Event], CarriedAlong | None]:
    """The WorkersReady condition set in ``status`` (readiness.py): its events, and the condition to write along."""
    seen = WorkersSeen(worker_pods, facts.worker_replicas, suspended=facts.suspended,
                       clean_pod_policy=facts.clean_pod_policy,
                       launcher_waits=launcher_waits and not facts.launcher_at_startup, create_error=create_error)
    return update_workers_ready(status, seen, facts.now)


def _managed_by(cached: JSONDict) -> str | None:
    """``spec.runPolicy.managedBy`` of a job that may not even parse (upstream checks it first)."""
    run_policy = object_at(cached, "spec", "runPolicy")
    value = run_policy.get("managedBy") if run_policy is not None else None
    return value if isinstance(value, str) else None  # another type is a validation error


def _errors_before_children(ctx: JobContext, cluster_domain: str) -> list[FieldError]:
    """Why the job cannot run as specified, found before any child is made: a ConfigMap past 1 MiB; with the IndexedJob
    backend, what its worker Job could not carry (the webhook checks it for jobs that name the backend; a job that
    gets it from ``--default-worker-backend`` is checked here)."""
    errors = builders.config_map_size_errors(ctx.job, cluster_domain)
    return errors + indexed_job_errors(ctx.job) if ctx.indexed else errors


def _validation_event(errors: list[FieldError]) -> Event:
    return Event("Warning", c.REASON_VALIDATION_ERROR, truncate(f"Found validation errors: {aggregate(errors)}"))
