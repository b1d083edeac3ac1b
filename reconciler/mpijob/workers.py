"""Worker pods: scale down, create the missing ones concurrently, and clean up on finish or suspend; a job of the
IndexedJob backend has each of these done through its worker Job instead (``indexed_workers.py``).

Writes for one job run concurrently in a TaskGroup, at most ``--max-concurrent-writes`` in flight in the whole
process: the first failure cancels the writes still in flight and is raised as itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import TypeVar

from reconciler.mpijob import builders, indexed_workers
from reconciler.mpijob.caches import slim_pod
from reconciler.mpijob.context import JobContext
from reconciler.mpijob.ensure import create_or_read, ensure_controlled
from reconciler.mpijob.errors import CreateFailedError
from reconciler.mpijob.status import Event, is_pod_ready, phase
from reconciler.runtime.api_resources import PODS
from reconciler.runtime.client import ApiError
from reconciler.runtime.metadata import is_controlled_by, meta
from shared.api import constants as c
from shared.api import names
from shared.jsondict import JSONDict

T = TypeVar("T")


def worker_index(job_name: str, pod_name: str, prefix: str = "") -> int | None:
    """The index in ``<job>-worker-<i>`` (the name, unlike the shifted label, never lies); ``prefix``, when given,
    is ``worker_prefix(job_name)``, computed once for many pods."""
    prefix = prefix or worker_prefix(job_name)
    suffix = pod_name[len(prefix):] if pod_name.startswith(prefix) else ""
    return int(suffix) if suffix.isdigit() else None


def worker_prefix(job_name: str) -> str:
    """``<job>-worker-``: a worker's name without its index."""
    return names.worker_name(job_name, 0)[:-1]


def owned_workers(ctx: JobContext) -> list[JSONDict]:
    """Every worker pod of the job (any index): controlled by the MPIJob, or by its worker Job (IndexedJob)."""
    if ctx.indexed:
        return indexed_workers.job_pods(ctx)
    selector = names.role_selector(ctx.name, c.ROLE_WORKER)
    return [p for p in ctx.shared.caches.pods.select(ctx.namespace, selector) if is_controlled_by(p, ctx.uid)]


async def _concurrently(ctx: JobContext, calls: Iterable[Callable[[], Awaitable[T]]]) -> list[T]:
    """The results of the calls, in order. A call (and the body it builds) starts only when one of the
    process's ``max_concurrent_writes`` slots (``ctx.shared.writes``, shared by every sync) is free: 16 syncs of
    16 workers hold at most 64 built pods at once, not 256 waiting for a connection, and a job of 1,000
    workers runs 64 tasks, not 1,000. The first failure cancels the calls still in flight and is raised
    itself (not wrapped in an ExceptionGroup)."""
    pending = list(calls)
    results: dict[int, T] = {}
    indexes = iter(range(len(pending)))

    async def run_next() -> None:
        for index in indexes:
            async with ctx.shared.writes:
                results[index] = await pending[index]()

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(len(pending), ctx.shared.settings.max_concurrent_writes)):
                group.create_task(run_next())
    except ExceptionGroup as failures:
        raise failures.exceptions[0] from None
    return [results[index] for index in range(len(pending))]


def _deletable(ctx: JobContext, pod: JSONDict) -> bool:
    """Not terminating yet, as far as the cache or this process's own recent deletes know."""
    name = meta(pod)["name"]
    if meta(pod).get("deletionTimestamp"):
        ctx.record.expectations.deletions.discard(ctx.namespace, name)
        return False
    return not ctx.record.expectations.deletions.holds(ctx.namespace, name, str(meta(pod).get("uid", "")))


async def _delete(ctx: JobContext, pod: JSONDict) -> None:
    name = meta(pod)["name"]
    try:
        await ctx.shared.cluster.delete(PODS, ctx.namespace, name)
    except ApiError as error:
        if not error.not_found:
            raise
    ctx.record.expectations.deletions.add(ctx.namespace, name, str(meta(pod).get("uid", "")))


async def scale_down(ctx: JobContext) -> None:
    """Delete owned workers whose index is at or beyond the replica count, highest index first."""
    job_name, uid, replicas = ctx.name, ctx.uid, ctx.worker_replicas
    selector, prefix = names.role_selector(job_name, c.ROLE_WORKER), worker_prefix(job_name)
    extra = [(index, p) for p in ctx.shared.caches.pods.select(ctx.namespace, selector)  # the index first: cheapest
             if (index := worker_index(job_name, meta(p)["name"], prefix)) is not None and index >= replicas
             and is_controlled_by(p, uid) and _deletable(ctx, p)]
    await _concurrently(ctx, (partial(_delete, ctx, p) for _, p in sorted(extra, key=lambda item: -item[0])))


async def _create(ctx: JobContext, index: int) -> JSONDict:
    """Create worker ``index`` (or read it when it exists); a pod the job does not control stops the sync. The
    pod is kept slim, as the cache holds it: a large job's creates would otherwise keep a full pod (about 10 KiB
    decoded) each until the sync ends."""
    desired = ctx.labelled(builders.build_worker(
        ctx.job, index, ctx.shared.settings.gang, cluster_domain=ctx.shared.settings.cluster_domain))
    pod, _ = await create_or_read(ctx, PODS, desired)
    ensure_controlled(ctx, pod, PODS)
    ctx.record.expectations.created(ctx.namespace, meta(pod)["name"])
    return slim_pod(pod) or pod


def _existing_workers(ctx: JobContext) -> tuple[dict[int, JSONDict], list[int]]:
    """The workers of indexes 0..replicas-1 the cache shows (or this process just created), and the missing
    indexes. Every existing pod's ownership is checked before anything is written (upstream stops at the
    first foreign pod, after creating the ones before it)."""
    found: dict[int, JSONDict] = {}
    missing = []
    # read once, not once a worker: a sync of a 10,000-worker job runs this loop 10,000 times
    job_name, namespace, uid = ctx.name, ctx.namespace, ctx.uid
    pods, expectations = ctx.shared.caches.pods, ctx.record.expectations
    for index in range(ctx.worker_replicas):
        name = names.worker_name(job_name, index)
        pod = pods.get(namespace, name)
        if pod is not None:
            expectations.observed(namespace, name)
            found[index] = pod if is_controlled_by(pod, uid) else ensure_controlled(ctx, pod, PODS)
        elif expectations.pending(namespace, name):
            found[index] = {"metadata": {"name": name, "namespace": namespace}, "status": {}}
        else:
            missing.append(index)
    return found, missing


async def ensure_workers(ctx: JobContext, *, create: bool = True) -> list[JSONDict]:
    """The worker pods of indexes 0..replicas-1, in index order, creating the missing ones (unless ``create`` is
    False: then only the existing ones). A failed create cancels the others and is reported in one Warning event,
    however many workers it concerned, and raised as ``CreateFailedError``."""
    if ctx.indexed:
        return await indexed_workers.ensure_workers(ctx, create=create)
    if ctx.job.replica_spec(c.WORKER) is None:
        return []
    found, missing = _existing_workers(ctx)
    await scale_down(ctx)
    if not create:
        return [found[index] for index in sorted(found)]
    try:
        created = await _concurrently(ctx, (partial(_create, ctx, index) for index in missing))
    except ApiError as error:
        await ctx.event(Event("Warning", c.REASON_FAILED, f"worker pod created failed: {error}"))
        raise CreateFailedError(error, [found[index] for index in sorted(found)]) from error
    found.update(zip(missing, created, strict=True))
    return [found[index] for index in range(ctx.worker_replicas)]


def all_ready(pods: list[JSONDict]) -> bool:
    """Every worker has the Ready condition (an empty list counts as ready, as upstream)."""
    return all(is_pod_ready(p) for p in pods)


async def delete_all(ctx: JobContext, pods: list[JSONDict]) -> None:
    """Delete these workers (a restart's teardown), but the ones already terminating."""
    doomed = sorted((p for p in pods if _deletable(ctx, p)), key=lambda p: worker_index(ctx.name, meta(p)["name"]) or 0)
    await _concurrently(ctx, (partial(_delete, ctx, p) for p in doomed))


async def clean_up(ctx: JobContext, *, finished: bool = False) -> None:
    """Delete workers per cleanPodPolicy: ``Running`` keeps pods that finished; ``All`` and ``None`` (when
    suspending) delete every worker. Pods already terminating are left to finish. The IndexedJob backend does it
    through its worker Job (``finished``: the job ended, rather than being suspended)."""
    if ctx.indexed:
        await indexed_workers.clean_up(ctx, finished=finished)
        return
    doomed = []
    for pod in owned_workers(ctx):
        if not _deletable(ctx, pod):
            continue
        if ctx.clean_pod_policy == c.CLEAN_POD_POLICY_RUNNING and phase(pod) not in ("Running", "Pending", ""):
            continue
        doomed.append(pod)
    doomed.sort(key=lambda p: worker_index(ctx.name, meta(p)["name"]) or 0)
    await _concurrently(ctx, (partial(_delete, ctx, p) for p in doomed))


def index_of(ctx: JobContext, pod: JSONDict) -> int | None:
    """A worker's index: in its name (Pods), or its completion index (IndexedJob)."""
    return indexed_workers.completion_index(pod) if ctx.indexed else worker_index(ctx.name, meta(pod)["name"])


def is_job_worker(ctx: JobContext, pod: JSONDict) -> bool:
    """Whether the worker pod is the job's own: controlled by the MPIJob, or by its current worker Job."""
    if not ctx.indexed:
        return is_controlled_by(pod, ctx.uid)
    job = indexed_workers.worker_job(ctx)
    return job is not None and is_controlled_by(pod, str(meta(job).get("uid", "")))
