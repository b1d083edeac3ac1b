"""Gang scheduling: the job's PodGroup (Volcano or scheduler-plugins), kept in step with its spec."""

from __future__ import annotations

import logging

from reconciler.mpijob import builders
from reconciler.mpijob.context import JobContext
from reconciler.mpijob.custom_resources import SCHEDULER_PLUGINS_POD_GROUPS, VOLCANO_POD_GROUPS
from reconciler.mpijob.ensure import ensure_controlled, get_or_create
from reconciler.runtime.api_resources import PRIORITY_CLASSES, Resource
from reconciler.runtime.client import ApiError
from reconciler.runtime.metadata import meta
from shared.api import constants as c
from shared.api import names

logger = logging.getLogger("reconciler")


def pod_group_resource(ctx: JobContext) -> Resource:
    assert ctx.shared.settings.gang is not None
    return VOLCANO_POD_GROUPS if ctx.shared.settings.gang.is_volcano else SCHEDULER_PLUGINS_POD_GROUPS


async def _priorities(ctx: JobContext) -> dict[str, int | None]:
    """The values of the PriorityClasses the pod templates name (missing ones: None)."""
    values: dict[str, int | None] = {}
    for replica_type in c.REPLICA_TYPES:
        spec = ctx.job.replica_spec(replica_type)
        name = ((spec.template or {}).get("spec") or {}).get("priorityClassName") if spec else None
        if isinstance(name, str) and name and name not in values:
            try:
                values[name] = int((await ctx.shared.cluster.get(PRIORITY_CLASSES, "", name)).get("value", 0))
            except ApiError as error:
                if not error.not_found:
                    raise
                values[name] = None
    return values


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
    """Create the PodGroup, or replace its spec when the job's scheduling policy changed."""
    assert ctx.shared.settings.gang is not None
    resource = pod_group_resource(ctx)
    priorities = await _priorities(ctx)
    desired = builders.build_pod_group(ctx.job, ctx.shared.settings.gang, priorities.get)
    existing, created = await get_or_create(ctx, ctx.shared.caches.pod_groups, resource, desired)
    if created:
        _warn_of_overridden_scheduler_names(ctx)
    if not created and existing.get("spec") != desired["spec"]:
        current = await ctx.shared.cluster.get(resource, ctx.namespace, meta(existing)["name"])
        await ctx.shared.cluster.replace(resource, {**current, "spec": desired["spec"]})


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
