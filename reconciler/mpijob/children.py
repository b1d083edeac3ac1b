"""The job's Service, ConfigMap, SSH Secret and launcher Job: get from the cache, create or converge.

A child that drifted converges in one merge patch with replace semantics (keys we do not set are
nulled) carrying the resourceVersion read, so a later sync finds nothing to do.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from reconciler.mpijob import builders, gating, indexed_workers
from reconciler.mpijob.builders.job_facts import run_policy_of
from reconciler.mpijob.caches import slim_job
from reconciler.mpijob.context import JobContext
from reconciler.mpijob.ensure import create_or_read, ensure_controlled, get_or_create
from reconciler.mpijob.status import Event, launcher_done, phase
from reconciler.mpijob.worker_backends import with_backend_label
from reconciler.runtime.api_resources import CONFIG_MAPS, ENDPOINT_SLICES, JOBS, SECRETS, SERVICES, Resource
from reconciler.runtime.client import ApiError
from reconciler.runtime.metadata import is_controlled_by, meta
from shared.api import constants as c
from shared.api import names
from shared.jsondict import JSONDict

logger = logging.getLogger("reconciler")

SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # the endpoints controller's label on a Service's EndpointSlices
NAMES_RECHECK_SECONDS = 0.5  # a Ready pod is published within moments; nothing we watch says when


async def _patch(ctx: JobContext, resource: Resource, existing: JSONDict, patch: JSONDict) -> None:
    """A merge patch of ``existing`` that fails with a conflict if it changed since it was read."""
    body = {**patch, "metadata": {"resourceVersion": meta(existing)["resourceVersion"]}}
    await ctx.shared.cluster.patch(resource, ctx.namespace, meta(existing)["name"], body)


async def find_launcher(ctx: JobContext, first_sync: bool) -> JSONDict | None:
    """The launcher Job, or None. The cache holds only Jobs an MPIJob controls, so on a job's first sync a
    miss is checked with a GET: a foreign Job with the launcher's name must stop us before any worker starts."""
    name = names.launcher_name(ctx.name)
    launcher = ctx.shared.caches.jobs.get(ctx.namespace, name)
    if launcher is None and first_sync:
        try:
            launcher = await ctx.shared.cluster.get(JOBS, ctx.namespace, name)
        except ApiError as error:
            if not error.not_found:
                raise
    return slim_job(ensure_controlled(ctx, launcher, JOBS)) if launcher is not None else None


async def ensure_service(ctx: JobContext) -> None:
    desired = with_backend_label(builders.build_service(ctx.job), ctx.worker_backend)
    existing, created = await get_or_create(ctx, ctx.shared.caches.services, SERVICES, desired)
    spec = None if created else builders.service_spec_patch(existing, desired)
    if spec is not None:
        await _patch(ctx, SERVICES, existing, {"spec": spec})


def running_workers(ctx: JobContext) -> list[builders.RunningWorker]:
    """Worker pods (of any index) in phase Running: what ``discover_hosts.sh`` lists; a worker Job's by their
    hostnames (their names carry a random suffix), each once."""
    if ctx.indexed:
        return list(indexed_workers.running_hostnames(ctx))
    selector, uid = names.role_selector(ctx.name, c.ROLE_WORKER), ctx.uid
    return [p for p in ctx.shared.caches.pods.select(ctx.namespace, selector)
            if phase(p) == "Running" and is_controlled_by(p, uid)]


async def ensure_config_map(ctx: JobContext) -> None:
    desired = builders.build_config_map(ctx.job, ctx.shared.settings.cluster_domain, running_workers(ctx))
    existing, created = await get_or_create(ctx, ctx.shared.caches.config_maps, CONFIG_MAPS, desired)
    if created:  # the create is a write: the first workers to run wait the interval like any later ones
        ctx.shared.settler.wrote(ctx.record.settled, "config")
        return
    if existing.get("data") == desired["data"]:
        ctx.shared.settler.up_to_date(ctx.record.settled, "config")
        return
    have = existing.get("data") or {}
    progress_only = have.get(c.HOSTFILE_NAME) == desired["data"][c.HOSTFILE_NAME]
    running = desired["data"].get(c.DISCOVER_HOSTS_SCRIPT_NAME)
    capped = not _growing_by_little(have.get(c.DISCOVER_HOSTS_SCRIPT_NAME), running, desired["data"][c.HOSTFILE_NAME])
    if progress_only and ctx.shared.settler.settle(ctx.key, ctx.record.settled, "config", running, capped=capped):
        return  # only the Running workers in discover_hosts.sh changed: written once they settle (settle.py)
    await _patch(ctx, CONFIG_MAPS, existing, {"data": _changed_keys(existing.get("data") or {}, desired["data"])})
    ctx.shared.settler.wrote(ctx.record.settled, "config")


GROWTH = 1.5  # while workers keep starting, discover_hosts.sh is rewritten once it lists half as many hosts again


def _hosts(script: object) -> set[str]:
    return {line[5:] for line in script.splitlines() if line.startswith("echo ")} if isinstance(script, str) else set()


def _growing_by_little(written: object, wanted: object, hostfile: str) -> bool:
    """True when the new ``discover_hosts.sh`` only adds hosts to the one written, fewer than half as many again,
    and does not list every host of the hostfile yet. Such a list is written once it stops changing (the
    settler's interval), not every ``SETTLE_LIMIT`` intervals: while thousands of workers start, the lists
    written grow geometrically, so their bytes add up to at most three times the final list, O(W) per job
    (rewritten every few seconds, a 10,000-worker start wrote about 30 lists of up to 0.7 MiB). A host that
    leaves the list, or the last ones to join, are written as before."""
    have, want = _hosts(written), _hosts(wanted)
    every = sum(1 for line in hostfile.splitlines() if line.strip())
    return bool(have) and have <= want and len(want) < GROWTH * len(have) and len(want) < every


def _changed_keys(have: JSONDict, want: JSONDict) -> JSONDict:
    """The merge patch of ``have`` into exactly ``want`` with only the keys that change: a new list of Running
    workers sends ``discover_hosts.sh`` alone, not the unchanged hostfile as well (half the bytes)."""
    patch = builders.replacing_merge_patch(have, want)
    return {key: value for key, value in patch.items() if key not in have or have[key] != value}


async def ensure_secret(ctx: JobContext) -> None:
    """The SSH Secret. Its key pair is generated once: extra keys are removed, a Secret that lost half of its
    pair gets a new pair, and an intact pair is never replaced (running jobs keep their credentials)."""
    existing = ctx.shared.caches.secrets.get(ctx.namespace, names.ssh_secret_name(ctx.name))
    if existing is None:
        existing, created = await create_or_read(ctx, SECRETS, builders.build_ssh_secret(ctx.job, ctx.shared.keygen()))
        if created:
            return
    ensure_controlled(ctx, existing, SECRETS)
    new_pair = None if builders.ssh_secret_has_key_pair(existing) else ctx.shared.keygen()
    data = builders.ssh_secret_data_patch(existing, new_pair)
    if data is not None:
        await _patch(ctx, SECRETS, existing, {"data": data})


async def _restart_policy_event(ctx: JobContext) -> None:
    if builders.template_overrides_restart_policy(ctx.job):
        await ctx.event(Event("Warning", c.REASON_SET_POD_TEMPLATE_RESTART_POLICY,
                              "Restart policy in pod template overridden by restart policy in replica spec"))


async def worker_names_resolve(ctx: JobContext, worker_pods: list[JSONDict]) -> bool:
    """Whether every worker's DNS name resolves (``gating.unpublished``), read from the Service's EndpointSlices on
    the API server (no cache of them is kept: this is asked once or twice per launcher start). If not, the job's
    sync is requeued shortly."""
    if not worker_pods:
        return True
    selector = f"{SERVICE_NAME_LABEL}={names.service_name(ctx.name)}"
    missing = gating.unpublished(worker_pods, await ctx.shared.cluster.list(ENDPOINT_SLICES, ctx.namespace, selector))
    if missing:
        logger.info("launcher held until every worker's name resolves",
                    extra={"kv": {"key": ctx.key, "unpublished": len(missing), "first": missing[0]}})
        ctx.shared.requeue(ctx.key, NAMES_RECHECK_SECONDS)
    return not missing


async def create_launcher(ctx: JobContext) -> JSONDict:
    await _restart_policy_event(ctx)
    desired = ctx.labelled(builders.build_launcher_job(ctx.job, ctx.shared.settings.gang))
    try:
        launcher, _ = await get_or_create(ctx, ctx.shared.caches.jobs, JOBS, desired)
    except ApiError as error:
        await ctx.event(Event("Warning", c.REASON_FAILED, f"launcher pod created failed: {error}"))
        raise
    return slim_job(launcher) or launcher


async def sync_launcher_suspension(ctx: JobContext, launcher: JSONDict, *, hold: bool) -> JSONDict:
    """Suspend the launcher Job with the MPIJob; release a suspended one, with the template's scheduling directives
    synced first, only when nothing ``hold``s it (the job is not suspended and, under WaitForWorkersReady, every
    worker is Ready). A released launcher is suspended only with the MPIJob, never for readiness."""
    job_suspended = bool((launcher.get("spec") or {}).get("suspend"))
    name = meta(launcher)["name"]
    if ctx.suspended and not job_suspended:
        patched = await ctx.shared.cluster.patch(JOBS, ctx.namespace, name, {"spec": {"suspend": True}})
        return slim_job(patched) or launcher
    if job_suspended and not hold:
        current = await ctx.shared.cluster.get(JOBS, ctx.namespace, name)
        if (current.get("status") or {}).get("startTime"):
            # The Job API allows template changes only while status.startTime is unset.
            current = {**current, "status": {k: v for k, v in current["status"].items() if k != "startTime"}}
            current = await ctx.shared.cluster.replace_status(JOBS, current)
        await _restart_policy_event(ctx)
        desired_template = builders.build_launcher_pod_template(ctx.job, ctx.shared.settings.gang)
        updated = await ctx.shared.cluster.replace(JOBS, builders.sync_scheduling_directives(current, desired_template))
        return slim_job(updated) or launcher
    return launcher


async def stop_launcher(ctx: JobContext, launcher: JSONDict | None) -> JSONDict | None:
    """The launcher Job of a job that ended before its launcher did (its workers were evicted) is suspended: the Job
    controller deletes its pods, so ``mpirun`` stops instead of running on against released workers, and the Job
    (and its pods' history) is kept. A launcher that finished, or is already suspended, is left as it is."""
    if launcher is None or launcher_done(launcher) or (launcher.get("spec") or {}).get("suspend"):
        return launcher
    patched = await ctx.shared.cluster.patch(JOBS, ctx.namespace, meta(launcher)["name"], {"spec": {"suspend": True}})
    return slim_job(patched) or launcher


async def delete_launcher(ctx: JobContext, launcher: JSONDict) -> None:
    """Delete the launcher Job of an attempt that ended (a restart), or a stopped one whose TTL expired, in the
    foreground: the Job stays until its pods are gone, so its name is not reused while an old ``mpirun`` may
    still run. A Job already being deleted (or that this process just deleted) is left alone."""
    name, uid = meta(launcher)["name"], str(meta(launcher).get("uid", ""))
    if meta(launcher).get("deletionTimestamp") or ctx.record.expectations.deletions.holds(ctx.namespace, name, uid):
        return
    try:
        await ctx.shared.cluster.delete(JOBS, ctx.namespace, name, propagation="Foreground")
    except ApiError as error:
        if not error.not_found:
            raise
    ctx.record.expectations.deletions.add(ctx.namespace, name, uid)


def seconds_to_launcher_expiry(ctx: JobContext, launcher: JSONDict | None, completion_time: str) -> float | None:
    """How long before the launcher Job this process stopped (``stop_launcher``) expires: the job's
    ``ttlSecondsAfterFinished`` after its ``completionTime``, as the TTL controller counts for a Job that
    finished (a suspended Job never does). None for any other launcher, or without a TTL."""
    ttl = run_policy_of(ctx.job).ttl_seconds_after_finished
    if (ttl is None or launcher is None or not is_controlled_by(launcher, ctx.uid) or launcher_done(launcher)
            or not (launcher.get("spec") or {}).get("suspend")):
        return None
    finished = datetime.fromisoformat(completion_time)
    return (finished + timedelta(seconds=ttl) - datetime.fromisoformat(ctx.now)).total_seconds()


def cached_launcher(ctx: JobContext) -> JSONDict | None:
    return ctx.shared.caches.jobs.get(ctx.namespace, names.launcher_name(ctx.name))


def launcher_pods(ctx: JobContext, launcher: JSONDict | None) -> list[JSONDict]:
    """Pods of the launcher Job (label selected, controlled by the Job)."""
    if launcher is None:
        return []
    selector = names.role_selector(ctx.name, c.ROLE_LAUNCHER)
    uid = meta(launcher).get("uid", "")
    return [p for p in ctx.shared.caches.pods.select(ctx.namespace, selector) if is_controlled_by(p, uid)]
