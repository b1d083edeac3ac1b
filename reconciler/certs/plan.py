"""What to renew in the webhook's TLS Secret, and when: a pure function of its contents, the time, and since when the
API server trusts the signing CA. Keys come from a parameter; nothing here reads a clock or calls the API.

The order that keeps every admission and conversion call working (the API server trusts a ``caBundle`` at once,
while a webhook pod sees a changed Secret only after kubelet's sync, up to a minute or two, plus its own reload):

1. A serving certificate renewed with the same CA needs nothing else: the old one is valid until the pods load
   the new one, since renewal starts ``serving_renew_before`` ahead of expiry.
2. A new CA is added to ``ca.crt`` (the caBundle) *beside* the old one, and published to every caBundle.
3. Only once every caBundle has trusted it for ``settle`` does a serving certificate signed by it go into the
   Secret; the pods switch over whenever kubelet delivers it, both certificates being trusted meanwhile.
4. A retired CA stays trusted until it expires: no serving certificate it signed outlives it, so nothing that
   could still be served is ever distrusted, however late a pod switches.

A serving certificate that cannot be served as it is (missing, expired, mismatched key, signed by no trusted CA) is
replaced at once: there is nothing left to keep working.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from reconciler.certs.material import Material
from shared.certificates import CA_COMMON_NAME, build_ca, build_serving_cert, dns_names_of, issued_by
from shared.cli import format_duration

DAY = timedelta(days=1)
SETTLE = timedelta(seconds=15)
"""How long every caBundle must have trusted a new CA before a certificate it signed is served: API servers see a
changed webhook configuration or CRD through their watch, within a second; this leaves a wide margin."""
RESYNC = timedelta(hours=1)
"""The longest the rotator sleeps without an event: a last resort, the watches wake it on every change."""
SOON = timedelta(seconds=5)
"""When to look again while waiting for the caBundles to follow (their watches normally wake the rotator first)."""


@dataclass(frozen=True)
class Policy:
    """Validity and renewal lead times (cert-manager's ``duration`` and ``renewBefore``) and the names to serve."""

    dns_names: tuple[str, ...]
    serving_duration: timedelta = 365 * DAY
    serving_renew_before: timedelta = 30 * DAY
    ca_duration: timedelta = 3650 * DAY
    ca_renew_before: timedelta = 90 * DAY
    settle: timedelta = SETTLE

    def problems(self) -> list[str]:
        """Why these settings cannot work, in the reconciler's flags (empty when they can): a certificate due for
        renewal as soon as it is issued, or a CA due after the serving certificates it signs, which its expiry would
        cut short into their own renewal window."""
        found = []
        if not self.dns_names:
            found.append("the serving certificate needs a DNS name")
        if not self.settle < self.serving_renew_before < self.serving_duration:
            found.append(f"--webhook-cert-renew-before ({format_duration(self.serving_renew_before)}) must be longer "
                         f"than {format_duration(self.settle)} and shorter than --webhook-cert-duration "
                         f"({format_duration(self.serving_duration)})")
        if not self.serving_renew_before < self.ca_renew_before < self.ca_duration:
            found.append(f"--webhook-ca-renew-before ({format_duration(self.ca_renew_before)}) must be longer than "
                         f"--webhook-cert-renew-before ({format_duration(self.serving_renew_before)}) and shorter "
                         f"than --webhook-ca-duration ({format_duration(self.ca_duration)})")
        return found


class Change:
    """What a renewal did, for logs and metrics."""

    CA_CREATED, CA_DROPPED, SERVING_ISSUED = "ca-created", "ca-dropped", "serving-issued"


@dataclass(frozen=True)
class Renewal:
    material: Material
    changes: tuple[tuple[str, str], ...] = ()
    """(Change, reason) pairs, in the order they were made."""
    wake_at: datetime | None = None
    """When to look again at the latest, with nothing else changing (None: only on a change)."""
    waiting: str = ""
    """A serving certificate due but held back until the caBundles trust its CA (the reason), or ""."""
    dropped: tuple[x509.Certificate, ...] = field(default=())


NewKey = Callable[[], ec.EllipticCurvePrivateKey]


@dataclass(frozen=True)
class Trust:
    """What the caBundles trust today, as the rotator saw them."""

    since: datetime | None = None
    """Since when every caBundle has held the signing CA (None: not yet, or not known since this process started)."""
    adopted: tuple[x509.Certificate, ...] = ()
    """The CAs in the caBundles: kept trusted until they expire when the Secret has no CA key yet (a first start
    over certificates made by hand or by cert-manager)."""


def renew(material: Material, now: datetime, policy: Policy, trust: Trust, new_key: NewKey) -> Renewal:
    """The Secret's next contents, given what the caBundles trust and a source of fresh keys."""
    changes: list[tuple[str, str]] = []
    adopted = trust.adopted if material.ca_key is None else ()
    kept: list[x509.Certificate] = []
    for ca in (*material.trusted, *adopted):
        if ca not in kept:
            kept.append(ca)
    trusted = [c for c in kept if c.not_valid_after_utc > now]
    dropped = tuple(c for c in material.trusted if c not in trusted)
    changes += [(Change.CA_DROPPED, f"expired {c.not_valid_after_utc.isoformat()}") for c in dropped]
    signer, ca_key, trusted_since = material.signer, material.ca_key, trust.since
    ca_due = _ca_due(material, trusted, now, policy)
    if ca_due or signer is None or ca_key is None:
        ca_key = new_key()
        signer, _ = build_ca(CA_COMMON_NAME, validity=policy.ca_duration, now=now, key=ca_key)
        trusted.insert(0, signer)
        changes.append((Change.CA_CREATED, ca_due))
        trusted_since = None  # a CA made now is trusted nowhere yet
    cert, key, waiting = material.cert, material.key, ""
    urgent, reason = _serving_problem(material, trusted, signer, now, policy)
    ready_at = trusted_since + policy.settle if trusted_since is not None else None
    if reason and (urgent or (ready_at is not None and ready_at <= now)):
        cert, key = build_serving_cert(signer, ca_key, policy.dns_names, validity=policy.serving_duration, now=now,
                                       key=new_key())
        changes.append((Change.SERVING_ISSUED, reason))
    elif reason:
        waiting = reason
    renewed = _material(material, trusted, ca_key, cert, key) if changes else material
    wake_at = _wake_at(renewed, now, policy, ready_at, waiting=bool(waiting))
    return Renewal(renewed, tuple(changes), wake_at, waiting, dropped)


def _ca_due(material: Material, trusted: list[x509.Certificate], now: datetime, policy: Policy) -> str:
    """Why a new CA is needed ("" when the signing CA may stay): none, or its renewal is due. Its renewal lead is
    at least the serving certificate's, so a certificate it signs is never cut short into its own renewal."""
    signer = material.signer
    if material.ca_key is None:
        return "no CA key in the Secret"
    if signer is None or signer not in trusted:
        return "the CA key matches no trusted CA"
    if _left(signer, now) <= max(policy.ca_renew_before, policy.serving_renew_before):
        return f"expires {signer.not_valid_after_utc.isoformat()}"
    return ""


def _material(before: Material, trusted: list[x509.Certificate], ca_key: ec.EllipticCurvePrivateKey,
              cert: x509.Certificate | None, key: object) -> Material:
    """The Secret's new values; a serving pair kept keeps its PEM as it was (a chain, an RSA key made by hand)."""
    if cert is before.cert:
        return Material(before.tls_crt, before.tls_key, Material.build(tuple(trusted), ca_key, None, None).ca_crt,
                        Material.build((), ca_key, None, None).ca_key_pem)
    assert isinstance(key, ec.EllipticCurvePrivateKey)  # issued here
    return Material.build(tuple(trusted), ca_key, cert, key)


def _serving_problem(material: Material, trusted: list[x509.Certificate], signer: x509.Certificate, now: datetime,
                     policy: Policy) -> tuple[bool, str]:
    """(now, reason) when the serving certificate must be replaced; (False, "") when it may stay. ``now``: at once,
    because whatever trusts the certificate served today trusts its successor (same CA), or because it cannot be
    served as it is, leaving nothing to keep working while the caBundles catch up; otherwise only once they trust
    the new CA."""
    unusable = _unusable(material, trusted, now)
    if unusable:
        return True, unusable
    cert = material.cert
    assert cert is not None
    if not issued_by(cert, signer):
        return False, "signed by the previous CA"
    # signed by the signing CA, which the caBundles trust as far as this certificate works at all: no need to wait
    if set(dns_names_of(cert)) != set(policy.dns_names):
        return True, "its DNS names differ"
    if _left(cert, now) <= policy.serving_renew_before:
        return True, f"expires {cert.not_valid_after_utc.isoformat()}"
    return False, ""


def _unusable(material: Material, trusted: list[x509.Certificate], now: datetime) -> str:
    """Why the serving certificate cannot be served as it is, or ""."""
    cert = material.cert
    if cert is None:
        return "no serving certificate"
    if not material.pair_matches:
        return "the key does not match the certificate"
    if not cert.not_valid_before_utc <= now < cert.not_valid_after_utc:
        return f"not valid now (from {cert.not_valid_before_utc.isoformat()} to {cert.not_valid_after_utc.isoformat()})"
    if not any(issued_by(cert, ca) for ca in trusted):
        return "signed by no trusted CA"
    return ""


def _wake_at(material: Material, now: datetime, policy: Policy, ready_at: datetime | None,
             *, waiting: bool) -> datetime:
    """The next moment something falls due: a CA expiring or due for renewal, the serving certificate due, a held
    back certificate allowed (or, before its CA is trusted everywhere, a look again soon)."""
    due = [now + RESYNC]
    due += [c.not_valid_after_utc for c in material.trusted]
    if material.signer is not None:
        lead = max(policy.ca_renew_before, policy.serving_renew_before)
        due.append(material.signer.not_valid_after_utc - lead)
    if material.cert is not None:
        due.append(material.cert.not_valid_after_utc - policy.serving_renew_before)
    if waiting:
        due.append(ready_at if ready_at is not None else now + SOON)
    return max(min(due), now + timedelta(seconds=1))


def _left(cert: x509.Certificate, now: datetime) -> timedelta:
    return cert.not_valid_after_utc - now
