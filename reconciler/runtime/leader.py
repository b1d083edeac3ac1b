"""Leader election on a coordination.k8s.io/v1 Lease, with upstream's timings (15 s / 5 s / 3 s).

``LeaderElector.run`` acquires the Lease, keeps renewing it, and returns (so the process exits)
when it loses it, as upstream's controller does.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from datetime import UTC, datetime, timedelta

from reconciler.runtime.client import ApiError, KubeClient
from reconciler.runtime.resources import LEASES
from shared.jsondict import JSONDict

logger = logging.getLogger("reconciler.runtime.leader")


def _now() -> datetime:
    return datetime.now(UTC)


def _micro(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str) -> datetime:
    return datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")


class LeaderElector:
    def __init__(self, client: KubeClient, namespace: str, name: str = "mpi-operator", *,
                 lease_duration: float = 15.0, renew_deadline: float = 5.0, retry_period: float = 3.0) -> None:
        self.client, self.namespace, self.name = client, namespace, name
        self.identity = f"{socket.gethostname()}_{uuid.uuid4()}"
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.leading = asyncio.Event()

    def _spec(self, acquire: datetime | None, transitions: int) -> JSONDict:
        now = _now()
        return {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": _micro(acquire or now), "renewTime": _micro(now), "leaseTransitions": transitions}

    async def try_acquire_or_renew(self) -> bool:
        try:
            lease = await self.client.request("GET", LEASES.path(self.namespace, self.name))
        except ApiError as error:
            if not error.not_found:
                raise
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace}, "spec": self._spec(None, 0)}
            await self.client.request("POST", LEASES.path(self.namespace), body)
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        renewed = spec.get("renewTime")
        expired = not renewed or _parse(renewed) + timedelta(seconds=spec.get("leaseDurationSeconds", 15)) < _now()
        if holder and holder != self.identity and not expired:
            return False
        ours = holder == self.identity
        acquire = _parse(spec["acquireTime"]) if ours and spec.get("acquireTime") else None
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)
        lease["spec"] = self._spec(acquire, transitions)
        await self.client.request("PUT", LEASES.path(self.namespace, self.name), lease)
        return True

    async def acquire(self) -> None:
        """Wait until this process holds the Lease."""
        while True:
            try:
                if await self.try_acquire_or_renew():
                    logger.info("became leader", extra={"kv": {"identity": self.identity, "lease": self.name}})
                    self.leading.set()
                    return
            except (ApiError, OSError) as error:
                logger.warning("leader election failed", extra={"kv": {"error": str(error)}})
            await asyncio.sleep(self.retry_period)

    async def keep(self) -> None:
        """Renew until a renewal misses its deadline, then return (leadership lost)."""
        last = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(self.retry_period)
            held = True
            try:
                held = await asyncio.wait_for(self.try_acquire_or_renew(), self.renew_deadline)
                if held:
                    last = asyncio.get_running_loop().time()
                    continue
            except (ApiError, OSError, TimeoutError) as error:
                logger.warning("lease renewal failed", extra={"kv": {"error": str(error)}})
            if not held or asyncio.get_running_loop().time() - last > self.renew_deadline:
                self.leading.clear()
                logger.error("leader election lost", extra={"kv": {"identity": self.identity}})
                return
