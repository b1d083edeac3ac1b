"""Gang scheduling: the job's PodGroup (Volcano or scheduler-plugins), kept in step with its spec."""

from __future__ import annotations

import logging

from reconciler.mpijob import builders
from reconciler.mpijob.context import JobContext
from reconciler.mpijob.custom_resources import SCHEDULER_PLUGINS_POD_GROUPS, VOLCANO_POD_GROUPS
from reconciler.mpijob.ensure import ensure_controlled, get_or_create
from reconciler.runtime.api_resources import Resource
from reconciler.runtime.client import ApiError
from reconciler.runtime.metadata import meta
from shared.api import constants as c
from shared.api import names

logger = logging.getLogger("reconciler")


def pod_group_resource(ctx: JobContext) -> Resource:
    assert ctx.shared.settings.gang is not None
    return VOLCANO_POD_GROUPS if ctx.shared.settings.gang.is_volcano else SCHEDULER_PLUGINS_POD_GROUPS


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


async def ensure_pod_group(ctx: JobContext) -> None:
    """Create the PodGroup, or replace the spec fields we own when they differ from the job's (by value)."""
    gang = ctx.shared.settings.gang
    assert gang is not None
    resource = pod_group_resource(ctx)
    priorities = await _priorities(ctx)
    desired = builders.build_pod_group(ctx.job, gang, priorities.get)
    existing, created = await get_or_create(ctx, ctx.shared.caches.pod_groups, resource, desired)
    if created:
        _warn_of_overridden_scheduler_names(ctx)
    if created or builders.pod_group_spec_update(existing.get("spec") or {}, desired["spec"], gang) is None:
        return
    current = await ctx.shared.cluster.get(resource, ctx.namespace, meta(existing)["name"])
    spec = builders.pod_group_spec_update(current.get("spec") or {}, desired["spec"], gang)
    if spec is not None:  # None: the cache lagged behind a write already made
        await ctx.shared.cluster.replace(resource, {**current, "spec": spec})


async def delete_pod_group(ctx: JobContext) -> None:
    """Delete the PodGroup if it exists (suspension and cleanup)."""
    name = names.pod_group_name(ctx.name)
    existing = ctx.shared.caches.pod_groups.get(ctx.namespace, name)
    if existing is None:
        return
    ensure_controlled(ctx, existing, pod_group_resource(ctx))
    try:
        await ctx.shared.cluster.delete(pod_group_resource(ctx), ctx.namespace, name)
    except ApiError as error:
        if not error.not_found:
            raise
