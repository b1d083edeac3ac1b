"""Leader election on a coordination.k8s.io/v1 Lease, judged as client-go's ``leaderelection`` does (15 s lease,
5 s renew deadline, 3 s retry). The contract: only a successful compare-and-swap of a record naming us makes this
process the leader; another holder's Lease expires only after this process saw it unchanged for a lease duration
by its own monotonic clock; ``keep`` returns when leadership is lost, and the same elector may ``acquire`` again;
a Lease refused before any request was allowed raises ``LeaseRefusedError``; ``release`` hands it back on
shutdown. Why, and how it behaves in an outage: docs/reconciler.md, "Leader election" and "Outages"."""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from reconciler.runtime.api_resources import LEASES
from reconciler.runtime.client import ApiError, KubeClient, StartupError
from shared.jsondict import JSONDict

logger = logging.getLogger("reconciler.leader")
JITTER = 1.2  # client-go's JitterFactor for the acquire loop
# upstream's timings (cmd/mpi-operator: client-go's leader election with these), in seconds
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 15.0, 5.0, 3.0
REFUSED = (401, 403)


class LeaseRefusedError(StartupError):
    """The API server refuses this process its Lease, and never allowed it: the RBAC or the flags are wrong."""

    def __init__(self, namespace: str, name: str, error: ApiError) -> None:
        super().__init__(
            f"leader election: the API server refused the Lease {namespace}/{name} ({error.status} {error.reason}: "
            f"{' '.join(error.message.split())}); deploy/rbac grants get, create and update on leases only in the "
            f"operator's namespace (Role mpi-operator-leader-election): set --lock-namespace to that namespace, "
            f"or grant those verbs on leases in {namespace}")


def _described(error: BaseException) -> str:
    """An error in one short line: its message, else (or when its message cannot be made) its type."""
    try:
        text = " ".join(str(error).split())[:300]
    except Exception:  # an exception whose __str__ fails (aiohttp's, half-built)
        text = ""
    return text or type(error).__name__


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseRecord:
    """The fields of a Lease spec that leader election reads, tolerant of missing or odd values."""

    holder: str = ""
    duration: float = 0.0
    acquire_time: str = ""
    transitions: int = 0
    renew_time: str = ""

    @classmethod
    def of(cls, lease: JSONDict) -> LeaseRecord:
        spec = lease.get("spec")
        spec = spec if isinstance(spec, dict) else {}

        def number(key: str) -> int:
            value = spec.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        def text(key: str) -> str:
            value = spec.get(key)
            return value if isinstance(value, str) else ""

        return cls(text("holderIdentity"), float(number("leaseDurationSeconds")), text("acquireTime"),
                   number("leaseTransitions"), text("renewTime"))


class LeaderElector:
    def __init__(  # noqa: PLR0913  client-go's LeaderElectionConfig: its timings keyword-only, named at each call
            self, client: KubeClient, namespace: str, name: str = "mpi-operator", *,
            lease_duration: float = LEASE_DURATION, renew_deadline: float = RENEW_DEADLINE,
            retry_period: float = RETRY_PERIOD, identity: str = "",
            clock: Callable[[], float] = time.monotonic) -> None:
        self.client, self.namespace, self.name = client, namespace, name
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.clock = clock
        self.leading = asyncio.Event()
        self.last_renewal: float | None = None
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._reported_holder = ""
        self._allowed = False  # some request for the Lease was allowed: later refusals are not fatal
        self._refused_since: float | None = None  # the first of the refusals since the last allowed request
        self._refusal = ""
        self._failing_since: float | None = None  # when the first failed attempt since the last answered one began
        self._failure = ""

    def _spec(self, acquire_time: str, transitions: int) -> JSONDict:
        return {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": acquire_time, "renewTime": _micro_now(), "leaseTransitions": transitions}

    def _observe(self, record: LeaseRecord) -> None:
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()

    def held_by_other(self, record: LeaseRecord) -> bool:
        """Someone else holds the Lease and we have not seen it unchanged for its whole duration."""
        return bool(record.holder) and record.holder != self.identity and (
            self._observed_at + record.duration > self.clock())

    async def try_acquire_or_renew(self) -> bool:
        """One attempt: True only when a record naming us was written. Raises on API failures."""
        path = LEASES.path(self.namespace, self.name)
        try:
            lease = await self.client.request("GET", path)
        except ApiError as error:
            if not error.not_found:
                raise
            return await self._create()
        record = LeaseRecord.of(lease)
        self._observe(record)
        if self.held_by_other(record):
            if record.holder != self._reported_holder:
                self._reported_holder = record.holder
                logger.info("lease held by another", extra={"kv": {"lease": self.name, "holder": record.holder}})
            return False
        ours = record.holder == self.identity
        acquire_time = record.acquire_time if ours and record.acquire_time else _micro_now()
        metadata = lease.get("metadata") if isinstance(lease.get("metadata"), dict) else {}
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
                "spec": self._spec(acquire_time, record.transitions + (0 if ours else 1))}
        try:
            written = await self.client.request("PUT", path, body)
        except ApiError as error:
            if error.conflict:  # someone else wrote it since our GET
                return False
            raise
        self._observe(LeaseRecord.of(written))
        return True

    async def _create(self) -> bool:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace}, "spec": self._spec(_micro_now(), 0)}
        try:
            written = await self.client.request("POST", LEASES.path(self.namespace), body)
        except ApiError as error:
            if error.already_exists:
                return False
            raise
        self._observe(LeaseRecord.of(written))
        return True

    async def _attempt(self, budget: float) -> bool:
        """``try_acquire_or_renew`` bounded by ``budget`` seconds; every failure is logged and counts as False,
        but for a refusal (401/403) before any allowed request: LeaseRefusedError."""
        began = self.clock()  # a failure counts from when its attempt began, as ``keep``'s deadline does
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation that arrives
            # as the inner call completes, and the acquire loop would then never stop.
            async with asyncio.timeout(max(budget, 0.001)):
                acquired = await self.try_acquire_or_renew()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a timeout, a dropped connection, a refusal: not acquired
            if isinstance(error, ApiError) and error.status in REFUSED:
                self._refused(error)
            if self._failing_since is None:
                self._failing_since = began
            self._failure = _described(error)
            logger.warning("lease attempt failed", extra={"kv": {"lease": self.name, "error": self._failure}})
            return False
        self._allowed, self._refused_since, self._failing_since = True, None, None
        return acquired

    def _refused(self, error: ApiError) -> None:
        if not self._allowed:
            raise LeaseRefusedError(self.namespace, self.name, error) from None
        if self._refused_since is None:
            self._refused_since = self.clock()
        self._refusal = f"{error.status} {error.reason}"

    async def acquire(self) -> None:
        """Wait until this process holds the Lease."""
        while True:
            if await self._attempt(self.renew_deadline):
                self.last_renewal = self.clock()
                self.leading.set()
                logger.info("became leader", extra={"kv": {"identity": self.identity, "lease": self.name}})
                return
            await asyncio.sleep(self.retry_period * (1 + random.random() * (JITTER - 1)))

    async def keep(self) -> None:
        """Renew every ``retry_period``; return (leadership lost) when no renewal succeeds within
        ``renew_deadline`` of a cycle's start."""
        while True:
            await asyncio.sleep(self.retry_period)
            deadline = self.clock() + self.renew_deadline
            renewed = await self._attempt(deadline - self.clock())
            while not renewed and deadline - self.clock() > 0:
                await asyncio.sleep(min(self.retry_period, deadline - self.clock()))
                if deadline - self.clock() > 0:
                    renewed = await self._attempt(deadline - self.clock())
            if not renewed:
                self.leading.clear()
                logger.error("leader election lost", extra={"kv": {"identity": self.identity, "lease": self.name}})
                return
            self.last_renewal = self.clock()

    async def release(self, budget: float = 5.0) -> None:
        """Hand the Lease back (holder emptied, 1 s duration) if we hold it, so a successor need not wait."""
        if not self.leading.is_set():
            return
        self.leading.clear()
        path = LEASES.path(self.namespace, self.name)
        try:
            async with asyncio.timeout(budget):
                lease = await self.client.request("GET", path)
                record = LeaseRecord.of(lease)
                if record.holder != self.identity:
                    return
                now = _micro_now()
                spec = {"holderIdentity": "", "leaseDurationSeconds": 1, "acquireTime": now, "renewTime": now,
                        "leaseTransitions": record.transitions}
                await self.client.request("PUT", path, {**lease, "spec": spec})
            logger.info("lease released", extra={"kv": {"identity": self.identity, "lease": self.name}})
        except Exception as error:  # the Lease then simply expires
            logger.warning("lease release failed", extra={"kv": {"lease": self.name, "error": repr(error)}})

    def problem(self) -> str | None:
        """Why this process should not be considered alive, or None: its Lease refused for a lease duration
        (leading or not), or renewals stalled while it leads (``keep`` wedged). A standby that is allowed its
        Lease is healthy, and so is a former leader campaigning again, through an API server outage too."""
        if self._refused_since is not None and self.clock() - self._refused_since >= self.lease_duration:
            return (f"lease {self.namespace}/{self.name} refused ({self._refusal}) for "
                    f"{self.clock() - self._refused_since:.0f} s: check the RBAC for leases in {self.namespace}")
        if self.leading.is_set() and self.last_renewal is not None and (
                self.clock() - self.last_renewal > self.lease_duration):
            return f"lease not renewed for {self.clock() - self.last_renewal:.0f} s"
        return None

    def readiness(self) -> str | None:
        """Why this process is not ready, or None: its Lease requests have failed (unanswered, or answered with
        an error) for at least the renew deadline, the time after which a leader gives up."""
        if self._failing_since is None or self.clock() - self._failing_since < self.renew_deadline:
            return None
        return (f"lease {self.namespace}/{self.name} requests failing for {self.clock() - self._failing_since:.0f} s "
                f"({self._failure}); {'leading' if self.leading.is_set() else 'not leading'}")
