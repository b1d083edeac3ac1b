"""The IndexedJob worker backend: the workers are the pods of one Indexed ``batch/v1`` Job ``<job>-worker``
(builders/worker_job.py), behind the seams ``workers.py`` offers for plain Pods.

The Job controller makes, replaces and (on a scale-down) removes the pods; this module makes the Job once the
MPIJob runs, patches its size, and deletes it (or suspends it) as the Pods backend deletes its pods. A Job being
deleted keeps its name until its pods are gone (foreground deletion, for a suspension or a restart): the next
Job, with the same name and so the same hostnames, is made by the sync its deletion's watch event brings, never
beside the old pods. Its pods are found in the cache by our labels, controlled by the worker Job; each index's
pod is the one the hostname ``<job>-worker-<i>`` stands for: an evicted one (it ends the job, as upstream's evicted
workers do, replaced or not), else the newest of those not being deleted.
"""

from __future__ import annotations

import logging

from reconciler.mpijob import builders
from reconciler.mpijob.caches import slim_job
from reconciler.mpijob.context import JobContext
from reconciler.mpijob.ensure import create_or_read, ensure_controlled
from reconciler.mpijob.errors import CreateFailedError
from reconciler.mpijob.status import Event, phase, truncate
from reconciler.runtime.api_resources import JOBS
from reconciler.runtime.client import ApiError
from reconciler.runtime.metadata import is_controlled_by, meta
from shared.api import constants as c
from shared.api import names
from shared.api.worker_backend import JOB_COMPLETION_INDEX
from shared.jsondict import JSONDict

logger = logging.getLogger("reconciler")
FOREGROUND, BACKGROUND = "Foreground", "Background"
REASON_UNRANKED = "WorkerWithoutReplicaIndex"
REASON_COMPLETED_INDEX = "WorkerIndexCompleted"  # a worker ended Succeeded: its index is made again
EVICTED = "Evicted"  # the kubelet's reason on a pod it evicted


def worker_job(ctx: JobContext) -> JSONDict | None:
    """The cached worker Job the MPIJob controls, or None."""
    found = ctx.shared.caches.jobs.get(ctx.namespace, builders.worker_job_name(ctx.name))
    return found if found is not None and is_controlled_by(found, ctx.uid) else None


def completion_index(pod: JSONDict) -> int | None:
    """The pod's index in its Indexed Job (the Job controller's label), None without one."""
    value = (meta(pod).get("labels") or {}).get(JOB_COMPLETION_INDEX)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def hostname(ctx: JobContext, pod: JSONDict) -> str:
    """The pod's ``spec.hostname`` (``<job>-worker-<i>``, which the Job controller sets), from its index if unset."""
    found = (pod.get("spec") or {}).get("hostname")
    return found if isinstance(found, str) and found else names.worker_name(ctx.name, completion_index(pod) or 0)


def job_pods(ctx: JobContext, job: JSONDict | None = None) -> list[JSONDict]:
    """Every worker pod (any index, any phase) of the worker Job ``job`` (the cached one by default)."""
    job = job if job is not None else worker_job(ctx)
    if job is None:
        return []
    uid = str(meta(job).get("uid", ""))
    selector = names.role_selector(ctx.name, c.ROLE_WORKER)
    return [p for p in ctx.shared.caches.pods.select(ctx.namespace, selector) if is_controlled_by(p, uid)]


def _preference(pod: JSONDict) -> tuple[bool, bool, str, str]:
    """Which of two pods of one index stands for it: an evicted one (an evicted worker ends the job, as upstream's,
    whether or not the Job controller has replaced it yet), then the one not being deleted, then the newest."""
    metadata = meta(pod)
    evicted = phase(pod) == "Failed" and (pod.get("status") or {}).get("reason") == EVICTED
    return (evicted, not metadata.get("deletionTimestamp"), str(metadata.get("creationTimestamp") or ""),
            str(metadata.get("name", "")))


def by_index(pods: list[JSONDict]) -> dict[int, JSONDict]:
    """The pod of each index (a replacement and the pod it replaces share one: ``_preference`` picks)."""
    chosen: dict[int, JSONDict] = {}
    for pod in pods:
        index = completion_index(pod)
        if index is not None and (index not in chosen or _preference(pod) > _preference(chosen[index])):
            chosen[index] = pod
    return chosen


def _placeholder(ctx: JobContext, index: int) -> JSONDict:
    """A worker the Job controller has not made yet: pending, with no UID (so its name is not published)."""
    return {"metadata": {"name": names.worker_name(ctx.name, index), "namespace": ctx.namespace}, "status": {}}


async def _create(ctx: JobContext) -> JSONDict | None:
    """Create the worker Job (or read the one a lagging cache hid); None while a Job of its name is still being
    deleted (its deletion's watch event brings the next sync). A refused create is one Warning event and a
    ``CreateFailedError``; a Job the MPIJob does not control stops the sync."""
    desired = ctx.labelled(builders.build_worker_job(
        ctx.job, ctx.shared.settings.gang, cluster_domain=ctx.shared.settings.cluster_domain))
    try:
        created, _ = await create_or_read(ctx, JOBS, desired)
    except ApiError as error:
        await ctx.event(Event("Warning", c.REASON_FAILED, f"worker Job created failed: {error}"))
        raise CreateFailedError(error, []) from error
    ensure_controlled(ctx, created, JOBS)
    if meta(created).get("deletionTimestamp"):
        logger.info("worker Job waits for its predecessor to go", extra={"kv": {"key": ctx.key}})
        return None
    return slim_job(created) or created


async def _scale(ctx: JobContext, job: JSONDict) -> None:
    """``parallelism`` and ``completions`` patched together to the worker replicas when they differ (elastic
    Indexed Job): the Job controller makes the new indexes, or deletes the pods of the indexes beyond."""
    patch = builders.worker_job_scale_patch(job, ctx.worker_replicas)
    if patch is not None:
        await ctx.shared.cluster.patch(JOBS, ctx.namespace, meta(job)["name"], patch)


async def ensure_workers(ctx: JobContext, *, create: bool = True) -> list[JSONDict]:
    """The workers of indexes 0..replicas-1 in index order, the ones the Job controller has not made yet as
    pending placeholders; the worker Job created (unless ``create`` is False: then only the existing pods) or
    scaled to the replicas."""
    if ctx.job.replica_spec(c.WORKER) is None:
        return []
    job = worker_job(ctx)
    if job is not None and meta(job).get("deletionTimestamp"):
        job = None  # a suspension's or a restart's: its successor waits for it to go
    elif job is not None:
        await _scale(ctx, job)
    elif create and ctx.worker_replicas > 0:
        job = await _create(ctx)
    found = by_index(job_pods(ctx, job)) if job is not None else {}
    await _report_unranked(ctx, found)
    if job is not None and create:
        await _remake_completed(ctx, job, found)
    if not create:
        return [found[index] for index in sorted(found) if index < ctx.worker_replicas]
    return [found.get(index) or _placeholder(ctx, index) for index in range(ctx.worker_replicas)]


async def _remake_completed(ctx: JobContext, job: JSONDict, found: dict[int, JSONDict]) -> None:
    """A worker that ended Succeeded (``sshd -De`` exits 0 on SIGTERM: a deleted worker pod) is never made again by
    the Job controller, which counts its index completed (``status.completedIndexes``). Once no pod of such an index
    is left (the Pods backend makes a deleted worker again; a Succeeded pod that stays, stays), the index is taken
    out of the Job's status, read fresh (an update with its resourceVersion: a conflict retries the sync): the Job
    controller then makes that worker again, with its hostname, and leaves the others running. One Warning event."""
    lost = {index for index in builders.parse_indexes((job.get("status") or {}).get("completedIndexes"))
            if index < ctx.worker_replicas and index not in found}
    if not lost:
        return
    current = await ctx.shared.cluster.get(JOBS, ctx.namespace, meta(job)["name"])
    if meta(current).get("uid") != meta(job).get("uid") or meta(current).get("deletionTimestamp"):
        return
    status = builders.without_completed_indexes(current.get("status") or {}, lost)
    if status is None:
        return
    await ctx.shared.cluster.replace_status(JOBS, {**current, "status": status})
    hosts = ", ".join(names.worker_name(ctx.name, index) for index in sorted(lost))
    await ctx.event(Event("Warning", REASON_COMPLETED_INDEX, truncate(
        f"worker index {','.join(map(str, sorted(lost)))} ({hosts}) ended Succeeded and its pod is gone: the Job "
        f"controller does not replace a completed index, so it is taken out of {meta(job)['name']}'s "
        "status.completedIndexes and the worker is made again")))


async def _report_unranked(ctx: JobContext, pods: dict[int, JSONDict]) -> None:
    """A Warning event, once per job (and process), when a worker pod lacks the rank label the webhook's pod
    mutation adds (it is not called: its ``failurePolicy: Ignore`` let the pod through). The job runs all the same;
    Kueue's topology-aware scheduling then places its pods without their rank order."""
    if ctx.record.unranked_said:
        return
    unranked = sorted(str(meta(p)["name"]) for p in pods.values() if c.LABEL_REPLICA_INDEX not in (
        meta(p).get("labels") or {}))
    if unranked:
        ctx.record.unranked_said = True
        await ctx.event(Event("Warning", REASON_UNRANKED, truncate(
            f"{len(unranked)}/{len(pods)} worker pods have no {c.LABEL_REPLICA_INDEX} label (the webhook's pod "
            f"mutation was not called), first {unranked[0]}: Kueue's topology-aware scheduling places them without "
            "their rank order")))


def running_hostnames(ctx: JobContext) -> list[str]:
    """The hostnames of the worker Job's Running pods (any index, each once): what ``discover_hosts.sh`` lists."""
    return sorted({hostname(ctx, p) for p in job_pods(ctx) if phase(p) == "Running"})


async def delete_worker_job(ctx: JobContext, job: JSONDict, propagation: str) -> None:
    """Delete the worker Job (its pods go with it), unless it is already being deleted (or this process just
    deleted it and the cache does not show it yet)."""
    name, uid = meta(job)["name"], str(meta(job).get("uid", ""))
    if meta(job).get("deletionTimestamp") or ctx.record.expectations.deletions.holds(ctx.namespace, name, uid):
        return
    try:
        await ctx.shared.cluster.delete(JOBS, ctx.namespace, name, propagation=propagation)
    except ApiError as error:
        if not error.not_found:
            raise
    ctx.record.expectations.deletions.add(ctx.namespace, name, uid)


async def clean_up(ctx: JobContext, *, finished: bool) -> None:
    """The worker Job of a finished job per cleanPodPolicy: ``All`` deletes it (in the background), ``Running``
    suspends it (the Job controller deletes its active pods and keeps the finished ones), ``None`` leaves it.
    A suspended job's is deleted in the foreground, so its successor's pods never meet its own."""
    job = worker_job(ctx)
    if job is None:
        return
    if not finished:
        await delete_worker_job(ctx, job, FOREGROUND)
    elif ctx.clean_pod_policy == c.CLEAN_POD_POLICY_ALL:
        await delete_worker_job(ctx, job, BACKGROUND)
    elif (ctx.clean_pod_policy == c.CLEAN_POD_POLICY_RUNNING and not (job.get("spec") or {}).get("suspend")
          and not meta(job).get("deletionTimestamp")):
        await ctx.shared.cluster.patch(JOBS, ctx.namespace, meta(job)["name"], {"spec": {"suspend": True}})
