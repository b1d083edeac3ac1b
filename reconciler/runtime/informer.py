"""List+watch of one resource into a Store, with slim objects and change callbacks.

A watch that ends is resumed from the last resourceVersion (bookmarks keep it fresh); ``410 Gone``
or an ERROR event triggers a relist; other failures are retried with capped exponential backoff.
Forbidden or Unauthorized stop the process, as upstream does: the operator cannot work without them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import aiohttp

from reconciler.runtime.api_resources import Resource
from reconciler.runtime.client import ApiError, KubeClient
from reconciler.runtime.store import Store
from shared.jsondict import JSONDict

Slim = Callable[[JSONDict], JSONDict | None]
OnChange = Callable[[JSONDict | None, JSONDict | None], None]
logger = logging.getLogger("reconciler.runtime.informer")
WATCH_TIMEOUT_SECONDS = 300
# Lists come in pages of 100: each page is decoded whole, and the arenas of a larger page stay in the RSS after
# its objects are slimmed or dropped (1,000 unrelated ConfigMaps matching the child selector at start-up: +2.9 MiB
# idle with pages of 500, +0.7 MiB with 100; hack/bench/footprint.py).
PAGE_SIZE = 100


class FatalWatchError(RuntimeError):
    """The API server refuses this watch (401/403): the process must stop."""


class Informer:
    def __init__(  # noqa: PLR0913  what to watch and where to put it: keyword-only, named at each call
            self, client: KubeClient, resource: Resource, *, slim: Slim, on_change: OnChange, namespace: str = "",
            label_selector: str = "", store: Store | None = None) -> None:
        self.client, self.resource = client, resource
        self.slim, self.on_change = slim, on_change
        self.namespace, self.label_selector = namespace, label_selector
        self.store = Store() if store is None else store
        self.synced = asyncio.Event()
        self.started = self.running = False  # started and no longer running: /healthz fails
        self._version = ""

    async def run(self) -> None:
        self.started = self.running = True
        try:
            await self._run()
        finally:
            self.running = False

    async def _run(self) -> None:
        backoff = 0.2
        while True:
            try:
                if not self._version:
                    await self._relist()
                await self._watch()
                backoff = 0.2
            except ApiError as error:
                if error.status in (401, 403):
                    raise FatalWatchError(f"{self.resource.plural}: {error}") from error
                if error.gone:
                    logger.info("watch expired, relisting", extra={"kv": {"resource": self.resource.plural}})
                    self._version = ""
                    continue
                logger.warning("watch failed", extra={"kv": {"resource": self.resource.plural, "error": str(error)}})
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as error:
                logger.warning("watch broken", extra={"kv": {"resource": self.resource.plural, "error": repr(error)}})
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    def _params(self) -> dict[str, str]:
        return {"labelSelector": self.label_selector} if self.label_selector else {}

    async def _relist(self) -> None:
        items: list[JSONDict] = []
        params = {**self._params(), "limit": str(PAGE_SIZE)}
        while True:
            page = await self.client.request("GET", self.resource.path(self.namespace), params=params)
            kind = self.resource.kind
            for item in page.get("items") or []:
                item.setdefault("kind", kind)
                slim = self.slim(item)
                if slim is not None:
                    items.append(slim)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                break
            params["continue"] = token
        before = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in self.store}
        gone = self.store.replace(items)
        self._version = str(page["metadata"]["resourceVersion"])
        for obj in items:
            old = before.get((obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))
            if old is None or old["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                self.on_change(old, obj)
        for obj in gone:
            self.on_change(obj, None)
        self.synced.set()

    async def _watch(self) -> None:
        params = {**self._params(), "resourceVersion": self._version, "timeoutSeconds": str(WATCH_TIMEOUT_SECONDS)}
        async for event in self.client.watch(self.resource.path(self.namespace), params):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                code = obj.get("code", 0)
                raise ApiError(int(code), str(obj.get("reason", "")), str(obj.get("message", "")))
            self._version = str((obj.get("metadata") or {}).get("resourceVersion") or self._version)
            if kind == "BOOKMARK":
                continue
            obj.setdefault("kind", self.resource.kind)
            self._apply(kind, obj)

    def _apply(self, kind: Any, obj: JSONDict) -> None:
        metadata = obj["metadata"]
        slim = self.slim(obj) if kind != "DELETED" else None
        if slim is None:  # deleted, or no longer of interest
            old = self.store.delete(metadata.get("namespace", ""), metadata["name"])
            if old is not None:
                self.on_change(old, None)
            return
        self.on_change(self.store.put(slim), slim)
