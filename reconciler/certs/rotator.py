"""The loop that keeps the webhook's TLS Secret and every caBundle current (``plan`` decides, this acts).

Each step reads the Secret and the three objects as last seen, renews what is due, writes the Secret (one update,
conditional on the version read), then sets each caBundle to the Secret's ``ca.crt``. It sleeps until the next
deadline or until a watched object changes. Only the leader runs it. An API failure is logged, counted and retried
with a backoff; it never stops the reconciler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

import aiohttp
from cryptography import x509
from prometheus_client import CollectorRegistry, Counter

from reconciler.certs.material import Material
from reconciler.certs.plan import Change, NewKey, Policy, Renewal, Trust, renew
from reconciler.certs.targets import CERT_MANAGER_ANNOTATION, TARGETS, Target, cas_in, trusts
from reconciler.runtime.client import ApiError
from shared.certificates import ca_bundle_b64, fingerprint, generate_key
from shared.jsondict import JSONDict

logger = logging.getLogger("reconciler.certs")
MAX_BACKOFF = 60.0


@dataclass(frozen=True)
class StoredSecret:
    """The Secret as last seen: its ``data`` (base64 values) and the version a write must be based on."""

    data: dict[str, str]
    resource_version: str


class Cluster(Protocol):
    """What the rotator needs of the API: the four objects as last seen, two writes, and a wake-up on change."""

    async def wait_synced(self) -> None: ...
    def secret(self) -> StoredSecret | None: ...
    def target(self, target: Target) -> JSONDict | None: ...
    async def save_secret(self, data: dict[str, str], previous: StoredSecret | None) -> None: ...
    async def patch_target(self, target: Target, patch: list[JSONDict]) -> None: ...
    async def changed(self, seconds: float) -> None:
        """Return when a watched object changed, or after ``seconds``."""


class RotationMetrics:
    """``mpi_operator_webhook_certificate_renewals_total`` by certificate (ca, serving) and the failed steps."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.renewals = Counter("mpi_operator_webhook_certificate_renewals",
                                "Managed webhook certificates made by the reconciler, by certificate (ca, serving).",
                                ["certificate"], registry=registry)
        self.errors = Counter("mpi_operator_webhook_certificate_errors",
                              "Steps of the managed certificate rotation that failed (retried with a backoff).",
                              registry=registry)
        for certificate in ("ca", "serving"):
            self.renewals.labels(certificate)


def utc_now() -> datetime:
    return datetime.now(UTC)


class Rotator:
    def __init__(self, cluster: Cluster, policy: Policy, metrics: RotationMetrics | None = None, *,
                 clock: Callable[[], datetime] = utc_now, new_key: NewKey = generate_key) -> None:
        self.cluster, self.policy, self.metrics = cluster, policy, metrics
        self.clock, self.new_key = clock, new_key
        self._trusted_since: dict[str, datetime] = {}  # signing CA's fingerprint -> first seen in every caBundle
        self._waiting = ""
        self._backoff = 0.0

    async def run(self) -> None:
        """Keep the certificates current until cancelled."""
        await self.cluster.wait_synced()
        while True:
            wake_at = await self.step_safely()
            await self.cluster.changed(max(0.0, (wake_at - self.clock()).total_seconds()))

    async def step_safely(self) -> datetime:
        """One step; on a failure, when to try again (with a backoff)."""
        try:
            wake_at = await self.step()
        except ApiError as error:
            if error.conflict or error.already_exists:  # written meanwhile: its watch brings the new version
                logger.info("webhook certificates: the Secret changed meanwhile, again",
                            extra={"kv": {"error": str(error)}})
                self._failed("", error)
            else:
                hint = " (RBAC: deploy/certs/builtin binds what it needs)" if error.status == 403 else ""
                self._failed(f"the API server refused a request{hint}", error)
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            self._failed("the API server is unreachable", error)
        except Exception as error:
            logger.exception("webhook certificate rotation failed")
            self._failed("", error, counted=True)
        else:
            self._backoff = 0.0
            return wake_at
        return self.clock() + timedelta(seconds=self._backoff)

    async def step(self) -> datetime:
        """Renew what is due, write the Secret, publish its CAs; when to look again at the latest."""
        now, stored = self.clock(), self.cluster.secret()
        material = Material.from_secret_data(stored.data if stored else None)
        renewal = renew(material, now, self.policy, self._trust(material, now), self.new_key)
        if renewal.changes:
            await self.cluster.save_secret(renewal.material.secret_data(), stored)
            self._report(renewal)
        elif renewal.waiting != self._waiting and renewal.waiting:
            logger.info("webhook serving certificate due, waiting for every caBundle to trust its CA",
                        extra={"kv": {"reason": renewal.waiting}})
        self._waiting = renewal.waiting
        await self._publish(renewal.material)
        return renewal.wake_at or now + timedelta(hours=1)

    def _trust(self, material: Material, now: datetime) -> Trust:
        bundles = [target.bundles(self.cluster.target(target)) for target in TARGETS]
        adopted = tuple(ca for b in bundles for ca in cas_in(b))
        signer = material.signer
        if signer is None:
            return Trust(None, adopted)
        key = fingerprint(signer)
        if all(trusts(b, signer) for b in bundles):
            return Trust(self._trusted_since.setdefault(key, now), adopted)
        self._trusted_since.pop(key, None)
        return Trust(None, adopted)

    async def _publish(self, material: Material) -> None:
        bundle = ca_bundle_b64(material.ca_crt)
        for target in TARGETS:
            obj = self.cluster.target(target)
            patch = target.patch(obj, bundle)
            if not patch:
                continue
            await self.cluster.patch_target(target, patch)
            annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
            kv = {"object": target.describe(), "cas": len(material.trusted),
                  "ca_serials": ",".join(_serial(c) for c in material.trusted)}
            if CERT_MANAGER_ANNOTATION in annotations:  # cainjector, if installed, would write it too
                kv["cert_manager_annotation"] = annotations[CERT_MANAGER_ANNOTATION]
            logger.info("webhook caBundle updated", extra={"kv": kv})

    def _report(self, renewal: Renewal) -> None:
        material = renewal.material
        for change, reason in renewal.changes:
            if change == Change.CA_CREATED and material.signer is not None:
                self._count("ca")
                logger.info("webhook CA created", extra={"kv": {**_describe(material.signer), "reason": reason}})
            elif change == Change.SERVING_ISSUED and material.cert is not None:
                self._count("serving")
                kv = {**_describe(material.cert), "ca_serial": _serial(material.signer), "reason": reason}
                logger.info("webhook serving certificate issued", extra={"kv": kv})
        for ca in renewal.dropped:
            logger.info("webhook CA dropped from the caBundle", extra={"kv": {**_describe(ca), "reason": "expired"}})

    def _count(self, certificate: str) -> None:
        if self.metrics is not None:
            self.metrics.renewals.labels(certificate).inc()

    def _failed(self, what: str, error: BaseException, *, counted: bool = False) -> None:
        """Back off (1 s doubling to a minute); count and log the failure unless it is a mere conflict."""
        self._backoff = min(max(self._backoff * 2, 1.0), MAX_BACKOFF)
        if (what or counted) and self.metrics is not None:
            self.metrics.errors.inc()
        if what:
            logger.warning(f"webhook certificate rotation failed: {what}",
                           extra={"kv": {"error": str(error) or type(error).__name__, "retry_in_s": self._backoff}})


def _describe(cert: x509.Certificate) -> dict[str, str]:
    return {"serial": _serial(cert), "not_after": cert.not_valid_after_utc.isoformat()}


def _serial(cert: x509.Certificate | None) -> str:
    return format(cert.serial_number, "x") if cert is not None else ""
