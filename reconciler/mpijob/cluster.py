"""Writes to the cluster: the seam between the sync logic and the API server.

``Cluster`` is the protocol the sync loop uses; ``KubeCluster`` implements it over ``KubeClient``.
Unit tests put a small recording fake of this seam in its place.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterable
from typing import Protocol

from reconciler.mpijob.status import Event
from reconciler.runtime.api_resources import EVENTS, Resource
from reconciler.runtime.client import KubeClient
from reconciler.runtime.metadata import meta
from shared.api import constants as c
from shared.jsondict import JSONDict

logger = logging.getLogger("reconciler")


class Cluster(Protocol):
    async def create(self, resource: Resource, obj: JSONDict) -> JSONDict: ...

    async def get(self, resource: Resource, namespace: str, name: str) -> JSONDict: ...

    async def list(self, resource: Resource, namespace: str, label_selector: str) -> list[JSONDict]: ...

    async def replace(self, resource: Resource, obj: JSONDict) -> JSONDict: ...

    async def replace_status(self, resource: Resource, obj: JSONDict) -> JSONDict: ...

    async def patch(self, resource: Resource, namespace: str, name: str, patch: JSONDict) -> JSONDict: ...

    async def delete(self, resource: Resource, namespace: str, name: str, propagation: str = "Background") -> None: ...

    async def record_event(self, involved: JSONDict, event: Event, now: str) -> None: ...


async def record_events(cluster: Cluster, involved: JSONDict, events: Iterable[Event], now: str) -> None:
    """The one way events are recorded: on ``involved``, best effort (a lost event never fails a sync)."""
    for event in events:
        try:
            await cluster.record_event(involved, event, now)
        except Exception as error:
            logger.warning("event not recorded", extra={"kv": {"reason": event.reason, "error": str(error)}})


class KubeCluster:
    """``Cluster`` over the API server. Replace and status writes carry the resourceVersion they read."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.instance = socket.gethostname()

    async def create(self, resource: Resource, obj: JSONDict) -> JSONDict:
        return await self.client.request("POST", resource.path(meta(obj).get("namespace", "")), obj)

    async def get(self, resource: Resource, namespace: str, name: str) -> JSONDict:
        return await self.client.request("GET", resource.path(namespace, name))

    async def list(self, resource: Resource, namespace: str, label_selector: str) -> list[JSONDict]:
        """The objects of ``namespace`` that match ``label_selector``, read from the API server (not a cache)."""
        answer = await self.client.request("GET", resource.path(namespace), params={"labelSelector": label_selector})
        items: list[JSONDict] = answer.get("items") or []
        return items

    async def replace(self, resource: Resource, obj: JSONDict) -> JSONDict:
        metadata = meta(obj)
        return await self.client.request("PUT", resource.path(metadata.get("namespace", ""), metadata["name"]), obj)

    async def replace_status(self, resource: Resource, obj: JSONDict) -> JSONDict:
        metadata = meta(obj)
        path = resource.path(metadata.get("namespace", ""), metadata["name"], "status")
        return await self.client.request("PUT", path, obj)

    async def patch(self, resource: Resource, namespace: str, name: str, patch: JSONDict) -> JSONDict:
        return await self.client.request("PATCH", resource.path(namespace, name), patch,
                                         content_type="application/merge-patch+json")

    async def delete(self, resource: Resource, namespace: str, name: str, propagation: str = "Background") -> None:
        await self.client.request("DELETE", resource.path(namespace, name),
                                  {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation})

    async def record_event(self, involved: JSONDict, event: Event, now: str) -> None:
        metadata = meta(involved)
        namespace = metadata.get("namespace", "")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{metadata['name']}.{time.time_ns():x}", "namespace": namespace},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion", c.API_VERSION), "kind": involved.get("kind", c.KIND),
                "name": metadata["name"], "namespace": namespace, "uid": metadata.get("uid", ""),
                "resourceVersion": metadata.get("resourceVersion", ""),
            },
            "reason": event.reason,
            "message": event.message,
            "type": event.type,
            "source": {"component": c.CONTROLLER_NAME},
            "reportingComponent": c.CONTROLLER_NAME,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        await self.client.request("POST", EVENTS.path(namespace), body)
