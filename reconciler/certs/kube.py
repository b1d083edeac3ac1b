"""The rotator's API calls: four objects watched by name, the Secret written, the caBundles patched.

Each object is listed and watched with ``fieldSelector=metadata.name=<name>``: RBAC can then grant list and watch
on that one name (``resourceNames``), and a change (a configuration applied without its caBundle, the Secret
deleted) wakes the rotator at once instead of at its next deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import aiohttp
from prometheus_client import CollectorRegistry

from reconciler.certs.plan import Policy
from reconciler.certs.policy import NAMESPACE, SECRET
from reconciler.certs.rotator import RotationMetrics, Rotator, StoredSecret
from reconciler.certs.targets import TARGETS, Target
from reconciler.runtime.api_resources import SECRETS, Resource
from reconciler.runtime.client import ApiError, KubeClient
from shared.jsondict import JSONDict

logger = logging.getLogger("reconciler.certs")
FIELD_MANAGER = "mpi-operator-webhook-certificates"
WATCH_TIMEOUT_SECONDS = 300
SECRET_LABELS = {"app.kubernetes.io/part-of": "mpijob-operator", "app.kubernetes.io/component": "webhook"}


class NamedObject:
    """One object, by kind and name, kept current by a list and a watch; ``obj`` is None while it does not exist."""

    def __init__(  # noqa: PLR0913  what to watch and what to do with it: keyword-only, named at each call
            self, client: KubeClient, resource: Resource, name: str, *, namespace: str = "",
            slim: Callable[[JSONDict], JSONDict], on_change: Callable[[], None]) -> None:
        self.client, self.resource, self.name, self.namespace = client, resource, name, namespace
        self.slim, self.on_change = slim, on_change
        self.obj: JSONDict | None = None
        self.synced = asyncio.Event()
        self._version = ""

    def describe(self) -> str:
        return f"{self.resource.plural}/{self.name}"

    async def run(self) -> None:
        backoff = 0.5
        while True:
            try:
                if not self._version:
                    await self._list()
                await self._watch()
                backoff = 0.5
            except ApiError as error:
                if error.gone:
                    self._version = ""
                    continue
                logger.warning("webhook certificates: cannot watch", extra={"kv": {
                    "object": self.describe(), "error": str(error)}})
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as error:
                logger.warning("webhook certificates: watch broken", extra={"kv": {
                    "object": self.describe(), "error": repr(error)}})
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 60.0)

    def set(self, obj: JSONDict | None) -> None:
        """Take a newer version of the object (a write's answer), so the next step needs not wait for the watch."""
        self.obj = self.slim(obj) if obj is not None else None
        self.on_change()

    def _selector(self) -> dict[str, str]:
        return {"fieldSelector": f"metadata.name={self.name}"}

    async def _list(self) -> None:
        page = await self.client.request("GET", self.resource.path(self.namespace), params=self._selector())
        items = page.get("items") or []
        self.obj = self.slim(items[0]) if items else None
        self._version = str(page["metadata"]["resourceVersion"])
        self.synced.set()
        self.on_change()

    async def _watch(self) -> None:
        params = {**self._selector(), "resourceVersion": self._version, "timeoutSeconds": str(WATCH_TIMEOUT_SECONDS)}
        async for event in self.client.watch(self.resource.path(self.namespace), params):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                raise ApiError(int(obj.get("code", 0)), str(obj.get("reason", "")), str(obj.get("message", "")))
            self._version = str((obj.get("metadata") or {}).get("resourceVersion") or self._version)
            if kind in ("ADDED", "MODIFIED"):
                self.set(obj)
            elif kind == "DELETED":
                self.set(None)


def slim_secret(obj: JSONDict) -> JSONDict:
    metadata = obj.get("metadata") or {}
    return {"metadata": {"name": metadata.get("name"), "resourceVersion": metadata.get("resourceVersion")},
            "data": dict(obj.get("data") or {})}


class KubeCertificates:
    """The rotator's ``Cluster`` over the API: the Secret ``name`` in ``namespace`` and the three targets."""

    def __init__(self, client: KubeClient, namespace: str, name: str) -> None:
        self.client, self.namespace, self.name = client, namespace, name
        self._changed = asyncio.Event()
        self._secret = NamedObject(client, SECRETS, name, namespace=namespace, slim=slim_secret,
                                   on_change=self._changed.set)
        self._targets = {t: NamedObject(client, t.resource, t.name, slim=t.slim, on_change=self._changed.set)
                         for t in TARGETS}
        self._tasks: list[asyncio.Task[None]] = []

    async def wait_synced(self) -> None:
        watches = [self._secret, *self._targets.values()]
        self._tasks = [asyncio.create_task(w.run(), name=f"watch {w.describe()}") for w in watches]
        await asyncio.gather(*(w.synced.wait() for w in watches))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def secret(self) -> StoredSecret | None:
        obj = self._secret.obj
        if obj is None:
            return None
        return StoredSecret(dict(obj.get("data") or {}), str(obj["metadata"].get("resourceVersion") or ""))

    def target(self, target: Target) -> JSONDict | None:
        return self._targets[target].obj

    async def save_secret(self, data: dict[str, str], previous: StoredSecret | None) -> None:
        """Create the Secret, or update its data if it is still at the version read (else 409 Conflict)."""
        if previous is None:
            body = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "data": data, "metadata": {
                "name": self.name, "namespace": self.namespace, "labels": SECRET_LABELS}}
            saved = await self.client.request("POST", SECRETS.path(self.namespace), body,
                                              params={"fieldManager": FIELD_MANAGER})
        else:
            patch = {"metadata": {"resourceVersion": previous.resource_version}, "data": data}
            saved = await self.client.request("PATCH", SECRETS.path(self.namespace, self.name), patch,
                                              params={"fieldManager": FIELD_MANAGER},
                                              content_type="application/merge-patch+json")
        self._secret.set(saved)

    async def patch_target(self, target: Target, patch: list[JSONDict]) -> None:
        patched = await self.client.request("PATCH", target.resource.path(name=target.name), patch,
                                            params={"fieldManager": FIELD_MANAGER},
                                            content_type="application/json-patch+json")
        self._targets[target].set(patched)

    async def changed(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), seconds)
        self._changed.clear()


class WebhookCertificates:
    """The rotation as the reconciler runs it: its policy and metrics for the process, a rotator for each term
    of leadership (``keep``, cancelled when the term ends)."""

    def __init__(self, policy: Policy, registry: CollectorRegistry, *, namespace: str = NAMESPACE,
                 secret: str = SECRET) -> None:
        self.policy, self.namespace, self.secret = policy, namespace, secret
        self.metrics = RotationMetrics(registry)

    async def keep(self, client: KubeClient) -> None:
        """Keep the certificates current until cancelled."""
        cluster = KubeCertificates(client, self.namespace, self.secret)
        try:
            await Rotator(cluster, self.policy, self.metrics).run()
        finally:
            await cluster.close()

