"""Gang scheduling: the job's PodGroup (Volcano or scheduler-plugins), kept in step with its spec; with native
gangs (``kube-scheduler``), its Workload and PodGroup, replaced when the gang changes (they are immutable)."""

from __future__ import annotations

import logging

from reconciler.mpijob import builders, custom_resources
from reconciler.mpijob.context import JobContext
from reconciler.mpijob.custom_resources import NATIVE_POD_GROUPS, NATIVE_WORKLOADS
from reconciler.mpijob.ensure import ensure_controlled, get_or_create
from reconciler.runtime.api_resources import Resource
from reconciler.runtime.client import ApiError
from reconciler.runtime.metadata import meta
from reconciler.runtime.store import Store
from shared.api import constants as c
from shared.api import names

logger = logging.getLogger("reconciler")


def pod_group_resource(ctx: JobContext) -> Resource:
    assert ctx.shared.settings.gang is not None
    return custom_resources.pod_group_resource(ctx.shared.settings.gang)


async def _priorities(ctx: JobContext) -> dict[str, int | None]:
    """The values of the PriorityClasses the pod templates name (missing ones: None), from a short-lived map."""
    names = []
    for replica_type in c.REPLICA_TYPES:
        spec = ctx.job.replica_spec(replica_type)
        name = ((spec.template or {}).get("spec") or {}).get("priorityClassName") if spec else None
        if isinstance(name, str) and name:
            names.append(name)
    return await ctx.shared.priority_classes.values(ctx.shared.cluster, names)


def _warn_of_overridden_scheduler_names(ctx: JobContext) -> None:
    """Gang scheduling replaces a template's own schedulerName: said once per job, as upstream logs it."""
    assert ctx.shared.settings.gang is not None
    for replica_type in c.REPLICA_TYPES:
        spec = ctx.job.replica_spec(replica_type)
        name = builders.overridden_scheduler_name(spec.template if spec else None, ctx.shared.settings.gang)
        if name:
            logger.warning("schedulerName overridden by gang scheduling", extra={"kv": {
                "key": ctx.key, "replica_type": replica_type, "template": name,
                "scheduler": ctx.shared.settings.gang.scheduler_name}})


async def ensure_pod_group(ctx: JobContext) -> bool:
    """Create the PodGroup, or replace the spec fields we own when they differ from the job's (by value). False
    when pods must not be made yet: a native gang's PodGroup or Workload is being deleted (or was now)."""
    gang = ctx.shared.settings.gang
    assert gang is not None
    if gang.is_native:
        return await _ensure_native(ctx)
    resource = pod_group_resource(ctx)
    priorities = await _priorities(ctx)
    desired = builders.build_pod_group(ctx.job, gang, priorities.get)
    existing, created = await get_or_create(ctx, ctx.shared.caches.pod_groups, resource, desired)
    if created:
        _warn_of_overridden_scheduler_names(ctx)
    if created or builders.pod_group_spec_update(existing.get("spec") or {}, desired["spec"], gang) is None:
        return True
    current = await ctx.shared.cluster.get(resource, ctx.namespace, meta(existing)["name"])
    spec = builders.pod_group_spec_update(current.get("spec") or {}, desired["spec"], gang)
    if spec is not None:  # None: the cache lagged behind a write already made
        await ctx.shared.cluster.replace(resource, {**current, "spec": spec})
    return True


async def _ensure_native(ctx: JobContext) -> bool:
    """The Workload, then the PodGroup made from it; whether both are the job's gang and not being deleted.
    Both are immutable: one that differs from the job's gang is deleted, and its deletion's watch event brings
    the sync that creates it anew. Until then no pod may be made: a pod naming a terminating PodGroup keeps
    it (its finalizer waits for every pod that names it), with the old size, for as long as the pod lives."""
    ready = True
    for resource, store, desired in (
            (NATIVE_WORKLOADS, ctx.shared.caches.workloads, builders.build_workload(ctx.job)),
            (NATIVE_POD_GROUPS, ctx.shared.caches.pod_groups, builders.build_native_pod_group(ctx.job))):
        existing, created = await get_or_create(ctx, store, resource, desired)
        if created:
            continue
        if meta(existing).get("deletionTimestamp"):
            ready = False
        elif builders.native_spec_differs(existing.get("spec") or {}, desired["spec"], resource.kind):
            await _delete(ctx, resource, store, meta(existing)["name"])
            ready = False
    return ready


async def _delete(ctx: JobContext, resource: Resource, store: Store, name: str) -> None:
    """Delete the job's object ``name`` if the cache holds it and the job controls it."""
    existing = store.get(ctx.namespace, name)
    if existing is None or meta(existing).get("deletionTimestamp"):
        return
    ensure_controlled(ctx, existing, resource)
    try:
        await ctx.shared.cluster.delete(resource, ctx.namespace, name)
    except ApiError as error:
        if not error.not_found:
            raise


async def delete_pod_group(ctx: JobContext) -> None:
    """Delete the PodGroup (and a native gang's Workload) if it exists (suspension and cleanup)."""
    name = names.pod_group_name(ctx.name)
    await _delete(ctx, pod_group_resource(ctx), ctx.shared.caches.pod_groups, name)
    if ctx.shared.settings.gang is not None and ctx.shared.settings.gang.is_native:
        await _delete(ctx, NATIVE_WORKLOADS, ctx.shared.caches.workloads, name)
