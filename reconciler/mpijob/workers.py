"""Worker pods: scale down, create the missing ones concurrently, and clean up on finish or suspend."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any

from reconciler.mpijob import builders
from reconciler.mpijob.context import JobContext
from reconciler.mpijob.status import Event, is_pod_ready, phase
from reconciler.runtime.client import ApiError
from reconciler.runtime.resources import PODS, is_controlled_by, meta
from shared.api import constants as c
from shared.api import names
from shared.jsondict import JSONDict


def worker_index(ctx: JobContext, pod: JSONDict) -> int | None:
    """The index in ``<job>-worker-<i>`` (the name, unlike the shifted label, never lies)."""
    prefix = names.worker_name(ctx.name, 0)[:-1]
    name = meta(pod)["name"]
    suffix = name[len(prefix):] if name.startswith(prefix) else ""
    return int(suffix) if suffix.isdigit() else None


def owned_workers(ctx: JobContext) -> list[JSONDict]:
    selector = names.role_selector(ctx.name, c.ROLE_WORKER)
    return [p for p in ctx.caches.pods.select(ctx.namespace, selector) if is_controlled_by(p, ctx.uid)]


async def _bounded(ctx: JobContext, calls: Iterable[Awaitable[Any]]) -> list[Any]:
    """Run API calls concurrently, at most ``max_concurrent_writes`` at once (the client limits the rate)."""
    gate = asyncio.Semaphore(ctx.settings.max_concurrent_writes)

    async def one(call: Awaitable[Any]) -> Any:
        async with gate:
            return await call

    return list(await asyncio.gather(*(one(call) for call in calls)))


def _deletable(ctx: JobContext, pod: JSONDict) -> bool:
    """Not terminating yet, as far as the cache or this process's own recent deletes know."""
    name = meta(pod)["name"]
    if meta(pod).get("deletionTimestamp"):
        ctx.expectations.deletions.discard(ctx.namespace, name)
        return False
    return (ctx.namespace, name) not in ctx.expectations.deletions


async def _delete(ctx: JobContext, pod: JSONDict) -> None:
    name = meta(pod)["name"]
    try:
        await ctx.cluster.delete(PODS, ctx.namespace, name)
    except ApiError as error:
        if not error.not_found:
            raise
    ctx.expectations.deletions.add(ctx.namespace, name)


async def scale_down(ctx: JobContext) -> None:
    """Delete owned workers whose index is at or beyond the replica count, highest index first."""
    extra = [(index, p) for p in owned_workers(ctx)
             if (index := worker_index(ctx, p)) is not None and index >= ctx.worker_replicas and _deletable(ctx, p)]
    await _bounded(ctx, (_delete(ctx, p) for _, p in sorted(extra, key=lambda item: -item[0])))


async def _create(ctx: JobContext, index: int) -> JSONDict:
    desired = builders.build_worker(ctx.job, index, ctx.settings.gang)
    name = desired["metadata"]["name"]
    try:
        pod = await ctx.cluster.create(PODS, desired)
    except ApiError as error:
        if not error.already_exists:
            await ctx.event(Event("Warning", c.REASON_FAILED, f"worker pod created failed: {error}"))
            raise
        pod = await ctx.cluster.get(PODS, ctx.namespace, name)
    ctx.expectations.created(ctx.namespace, name)
    return pod


async def ensure_workers(ctx: JobContext) -> list[JSONDict]:
    """The worker pods of indexes 0..replicas-1, in index order, creating the missing ones."""
    if ctx.job.replica_spec(c.WORKER) is None:
        return []
    await scale_down(ctx)
    found: dict[int, JSONDict] = {}
    missing = []
    for index in range(ctx.worker_replicas):
        name = names.worker_name(ctx.name, index)
        pod = ctx.caches.pods.get(ctx.namespace, name)
        if pod is not None:
            ctx.expectations.observed(ctx.namespace, name)
            found[index] = pod
        elif ctx.expectations.pending(ctx.namespace, name):
            found[index] = {"metadata": {"name": name, "namespace": ctx.namespace}, "status": {}, "_expected": True}
        else:
            missing.append(index)
    created = await _bounded(ctx, (_create(ctx, index) for index in missing))
    found.update(zip(missing, created, strict=True))
    for pod in found.values():
        if not pod.get("_expected") and not is_controlled_by(pod, ctx.uid):
            raise await ctx.not_ours(meta(pod)["name"], str(pod.get("kind", "")))
    return [found[index] for index in range(ctx.worker_replicas)]


def all_ready(pods: list[JSONDict]) -> bool:
    """Every worker has the Ready condition (an empty list counts as ready, as upstream)."""
    return all(is_pod_ready(p) for p in pods)


async def clean_up(ctx: JobContext) -> None:
    """Delete workers per cleanPodPolicy: ``Running`` keeps pods that finished; ``All`` and ``None`` (when
    suspending) delete every worker. Pods already terminating are left to finish."""
    doomed = []
    for pod in owned_workers(ctx):
        if not _deletable(ctx, pod):
            continue
        if ctx.clean_pod_policy == c.CLEAN_POD_POLICY_RUNNING and phase(pod) not in ("Running", "Pending", ""):
            continue
        doomed.append(pod)
    await _bounded(ctx, (_delete(ctx, p) for p in sorted(doomed, key=lambda p: worker_index(ctx, p) or 0)))
