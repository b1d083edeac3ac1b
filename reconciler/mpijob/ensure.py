"""Ensuring a child exists and is the job's: get-or-create, and the ownership check every child passes
(upstream's ``ErrResourceExists``).

A create that answers 409 AlreadyExists (a cache that lags, a restarted reconciler, an object the cache
does not hold because no MPIJob controls it) reads the object and goes on with it when the job controls it.
"""

from __future__ import annotations

from reconciler.mpijob.context import JobContext
from reconciler.mpijob.errors import ResourceExistsError
from reconciler.runtime.api_resources import Resource
from reconciler.runtime.client import ApiError
from reconciler.runtime.metadata import is_controlled_by, meta
from reconciler.runtime.store import Store
from shared.jsondict import JSONDict


def ensure_controlled(ctx: JobContext, obj: JSONDict, resource: Resource) -> JSONDict:
    """``obj`` itself when the job controls it; otherwise ResourceExistsError (the sync reports it)."""
    if not is_controlled_by(obj, ctx.uid):
        raise ResourceExistsError(str(meta(obj).get("name", "")), resource.kind)
    return obj


async def create_or_read(ctx: JobContext, resource: Resource, desired: JSONDict) -> tuple[JSONDict, bool]:
    """Create ``desired``; when it already exists, the stored object, read from the API. True when just created."""
    try:
        return await ctx.shared.cluster.create(resource, desired), True
    except ApiError as error:
        if not error.already_exists:
            raise
    return await ctx.shared.cluster.get(resource, ctx.namespace, desired["metadata"]["name"]), False


async def get_or_create(ctx: JobContext, store: Store, resource: Resource, desired: JSONDict) -> tuple[JSONDict, bool]:
    """The controlled object with ``desired``'s name, from the cache or created; True when just created."""
    existing = store.get(ctx.namespace, desired["metadata"]["name"])
    created = False
    if existing is None:
        existing, created = await create_or_read(ctx, resource, desired)
    return ensure_controlled(ctx, existing, resource), created
