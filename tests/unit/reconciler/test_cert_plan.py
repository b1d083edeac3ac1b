"""The rotation's plan (reconciler/certs/plan.py): what is renewed when, from the Secret's contents, the time and
since when the caBundles trust the signing CA. Pure: a fixed clock and keys made here."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from reconciler.certs.material import Material
from reconciler.certs.plan import SETTLE, SOON, Change, Policy, Renewal, Trust, renew
from shared.certificates import (
    build_ca,
    build_serving_cert,
    cert_pem,
    dns_names_of,
    generate_key,
    issued_by,
    key_pem,
)

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
NAMES = ("mpijob-webhook.mpi-operator.svc", "mpijob-webhook")
POLICY = Policy(NAMES)  # a year, 30 days before; a 10-year CA, 90 days before
DAY = timedelta(days=1)


def fresh(now: datetime = NOW, policy: Policy = POLICY) -> Material:
    return renew(Material(), now, policy, Trust(), generate_key).material


def served_at(material: Material, at: datetime, policy: Policy = POLICY) -> Material:
    """The material with a serving certificate issued at `at` by the same CA (renewals kept it current)."""
    renewal = run(material, at, since=None, policy=policy)
    assert kinds(renewal) == [Change.SERVING_ISSUED]
    return renewal.material


def run(material: Material, now: datetime, since: datetime | None = None, adopted: tuple[x509.Certificate, ...] = (),
        policy: Policy = POLICY) -> Renewal:
    return renew(material, now, policy, Trust(since, adopted), generate_key)


def kinds(renewal: Renewal) -> list[str]:
    return [change for change, _ in renewal.changes]


def test_a_first_start_makes_a_ca_and_a_serving_certificate_it_signed() -> None:
    renewal = run(Material(), NOW)
    assert kinds(renewal) == [Change.CA_CREATED, Change.SERVING_ISSUED]
    material = renewal.material
    assert material.signer is not None
    assert material.cert is not None
    assert material.pair_matches
    assert material.trusted == (material.signer,)
    assert issued_by(material.cert, material.signer)
    assert sorted(dns_names_of(material.cert)) == sorted(NAMES)
    assert material.cert.not_valid_after_utc == NOW + 365 * DAY
    assert material.signer.not_valid_after_utc == NOW + 3650 * DAY
    assert renewal.wake_at == NOW + timedelta(hours=1)  # the resync: nothing falls due sooner
    assert set(material.secret_data()) == {"tls.crt", "tls.key", "ca.crt", "ca.key"}


def test_the_secret_round_trips_through_its_data() -> None:
    material = fresh()
    assert Material.from_secret_data(material.secret_data()) == material


def test_nothing_changes_until_something_is_due_and_the_next_look_is_the_first_deadline() -> None:
    material = fresh()
    renewal = run(material, NOW + DAY, since=NOW)
    assert renewal.changes == ()
    assert renewal.material is material
    assert renewal.wake_at == NOW + DAY + timedelta(hours=1)  # the resync: nothing is due within the hour
    late = run(material, NOW + 335 * DAY - timedelta(minutes=10), since=NOW)
    assert late.changes == ()
    assert late.wake_at == NOW + 335 * DAY  # 30 days before the serving certificate expires


def test_a_serving_certificate_due_is_renewed_with_the_same_ca_at_once() -> None:
    material = fresh()
    due = NOW + 335 * DAY
    renewal = run(material, due, since=None)  # same CA: no need to know what the caBundles trust
    assert kinds(renewal) == [Change.SERVING_ISSUED]
    assert renewal.material.signer == material.signer
    assert renewal.material.trusted == material.trusted
    assert renewal.material.ca_key_pem == material.ca_key_pem
    assert renewal.material.cert is not None
    assert renewal.material.cert != material.cert
    assert renewal.material.cert.not_valid_after_utc == due + 365 * DAY


def test_a_ca_due_is_added_beside_the_old_one_and_the_switch_waits_for_the_ca_bundles() -> None:
    first = fresh()
    assert first.signer is not None
    due = first.signer.not_valid_after_utc - 90 * DAY
    material = served_at(first, due - 10 * DAY)
    renewal = run(material, due, since=NOW)
    assert kinds(renewal) == [Change.CA_CREATED]
    new = renewal.material
    assert new.signer is not None
    assert new.signer != material.signer
    assert new.trusted == (new.signer, material.signer)  # newest first, the old one kept
    assert new.cert == material.cert
    assert new.tls_crt == material.tls_crt
    assert renewal.waiting == "signed by the previous CA"
    assert renewal.wake_at == due + SOON
    # the caBundles do not trust the new CA yet: still waiting
    assert run(new, due + timedelta(seconds=30), since=None).changes == ()
    # they have, but for less than the settle time
    trusted_at = due + timedelta(seconds=40)
    early = run(new, trusted_at + timedelta(seconds=5), since=trusted_at)
    assert early.changes == ()
    assert early.wake_at == trusted_at + SETTLE
    # long enough: the serving certificate signed by the new CA goes in, both CAs stay trusted
    switch = run(new, trusted_at + SETTLE, since=trusted_at)
    assert kinds(switch) == [Change.SERVING_ISSUED]
    assert switch.material.cert is not None
    assert issued_by(switch.material.cert, new.signer)
    assert switch.material.trusted == new.trusted


def test_a_retired_ca_stays_trusted_until_it_expires() -> None:
    first = fresh()
    assert first.signer is not None
    old_expiry = first.signer.not_valid_after_utc
    material = served_at(first, old_expiry - 100 * DAY)
    renewed = run(material, old_expiry - 90 * DAY, since=NOW).material
    switched = run(renewed, old_expiry - 89 * DAY, since=old_expiry - 90 * DAY).material
    assert len(switched.trusted) == 2
    before = run(switched, old_expiry - timedelta(seconds=1), since=old_expiry - 90 * DAY)
    assert before.changes == ()
    assert before.wake_at == old_expiry
    after = run(switched, old_expiry, since=old_expiry - 90 * DAY)
    assert kinds(after) == [Change.CA_DROPPED]
    assert after.material.trusted == (switched.signer,)
    assert after.dropped == (material.signer,)
    assert after.material.tls_crt == switched.tls_crt


def manual(*, with_ca_crt: bool) -> tuple[Material, x509.Certificate]:
    """A Secret made by hand with `python -m webhook.certs` (README, section 3): no ca.key in it, and ca.crt only
    when the admin added it; the caBundles hold the CA the admin patched in."""
    ca, ca_key = build_ca("manual-ca", validity=3650 * DAY, now=NOW - 100 * DAY)
    cert, key = build_serving_cert(ca, ca_key, NAMES, validity=365 * DAY, now=NOW - 100 * DAY)
    return Material(cert_pem(cert), key_pem(key), cert_pem(ca) if with_ca_crt else b""), ca


@pytest.mark.parametrize("with_ca_crt", [True, False], ids=["ca.crt-in-the-secret", "no-ca.crt"])
def test_a_first_start_over_certificates_made_by_hand_overlaps_their_ca(with_ca_crt: bool) -> None:
    material, ca = manual(with_ca_crt=with_ca_crt)
    renewal = run(material, NOW, since=None, adopted=(ca,))
    assert kinds(renewal) == [Change.CA_CREATED]
    assert renewal.waiting == "signed by the previous CA"  # served as it is until the new CA is trusted
    assert renewal.material.trusted == (renewal.material.signer, ca)
    assert renewal.material.tls_crt == material.tls_crt


def test_the_ca_bundles_are_adopted_only_while_the_secret_has_no_ca_key() -> None:
    material = fresh()
    stranger, _ = build_ca("someone-else", validity=10 * DAY, now=NOW)
    renewal = run(material, NOW + DAY, since=NOW, adopted=(stranger,))
    assert renewal.changes == ()
    assert stranger not in renewal.material.trusted


@pytest.mark.parametrize("broken", ["missing", "mismatched key", "expired", "unknown CA"])
def test_a_serving_certificate_that_cannot_be_served_is_replaced_at_once(broken: str) -> None:
    material = fresh()
    signer, ca_key = material.signer, material.ca_key
    assert signer is not None
    assert ca_key is not None
    if broken == "missing":
        material = Material(b"", b"", material.ca_crt, material.ca_key_pem)
    elif broken == "mismatched key":
        material = Material(material.tls_crt, key_pem(generate_key()), material.ca_crt, material.ca_key_pem)
    elif broken == "expired":
        cert, key = build_serving_cert(signer, ca_key, NAMES, validity=DAY, now=NOW)
        material = Material(cert_pem(cert), key_pem(key), material.ca_crt, material.ca_key_pem)
    else:
        other, other_key = build_ca("other", validity=DAY, now=NOW)
        cert, key = build_serving_cert(other, other_key, NAMES, validity=DAY, now=NOW)
        material = Material(cert_pem(cert), key_pem(key), material.ca_crt, material.ca_key_pem)
    now = NOW + (2 * DAY if broken == "expired" else timedelta(0))
    renewal = run(material, now, since=None)
    assert kinds(renewal) == [Change.SERVING_ISSUED]
    assert renewal.material.pair_matches
    assert renewal.material.signer == material.signer


def test_new_dns_names_are_served_at_once_with_the_same_ca() -> None:
    material = fresh()
    renewal = run(material, NOW + DAY, since=None, policy=Policy((*NAMES, "webhook.example.com")))
    assert kinds(renewal) == [Change.SERVING_ISSUED]
    assert renewal.material.cert is not None
    assert "webhook.example.com" in dns_names_of(renewal.material.cert)


def test_a_serving_pair_kept_keeps_its_pem_bytes() -> None:
    """An RSA pair made by hand, served until the new CA is trusted: its PEM is written back unchanged."""
    ca, ca_key = build_ca("manual-ca", validity=3650 * DAY, now=NOW)
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(ca.subject)
            .public_key(rsa_key.public_key()).serial_number(7).not_valid_before(NOW - DAY)
            .not_valid_after(NOW + 100 * DAY)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in NAMES]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pkcs1 = rsa_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                  serialization.NoEncryption())
    material = Material(cert_pem(cert), pkcs1, cert_pem(ca))
    renewal = run(material, NOW, since=None)
    assert kinds(renewal) == [Change.CA_CREATED]
    assert (renewal.material.tls_crt, renewal.material.tls_key) == (material.tls_crt, pkcs1)


def test_unreadable_values_read_as_absent() -> None:
    material = Material.from_secret_data({"tls.crt": "not base64!", "tls.key": base64.b64encode(b"junk").decode(),
                                          "ca.crt": base64.b64encode(b"-----BEGIN CERTIFICATE-----\nx\n").decode()})
    assert (material.cert, material.key, material.trusted, material.ca_key) == (None, None, (), None)
    assert kinds(run(material, NOW)) == [Change.CA_CREATED, Change.SERVING_ISSUED]


def test_a_short_lived_ca_is_renewed_at_its_own_lead() -> None:
    short = Policy(NAMES, serving_duration=10 * DAY, serving_renew_before=5 * DAY, ca_duration=100 * DAY,
                   ca_renew_before=6 * DAY)
    first = fresh(policy=short)
    assert first.signer is not None
    due = first.signer.not_valid_after_utc - 6 * DAY
    material = served_at(first, due - DAY, short)
    renewal = run(material, due, since=NOW, policy=short)
    assert kinds(renewal) == [Change.CA_CREATED]


@pytest.mark.parametrize(("policy", "message"), [
    (Policy(NAMES, serving_renew_before=400 * DAY), "--webhook-cert-renew-before (9600h) must be longer than 15s "
                                                    "and shorter than --webhook-cert-duration (8760h)"),
    (Policy(NAMES, serving_renew_before=timedelta(seconds=10)), "must be longer than 15s"),
    (Policy(NAMES, ca_renew_before=10 * DAY), "--webhook-ca-renew-before (240h) must be longer than "
                                              "--webhook-cert-renew-before (720h)"),
    (Policy(NAMES, ca_duration=50 * DAY), "shorter than --webhook-ca-duration (1200h)"),
    (Policy(()), "needs a DNS name"),
], ids=["serving-lead-past-validity", "serving-lead-under-settle", "ca-lead-under-serving-lead",
        "ca-lead-past-validity",
        "no-names"])
def test_settings_that_cannot_work_are_refused(policy: Policy, message: str) -> None:
    assert any(message in problem for problem in policy.problems()), policy.problems()


def test_the_defaults_work() -> None:
    assert POLICY.problems() == []


def test_the_next_look_is_never_in_the_past() -> None:
    material = fresh()
    for offset in (timedelta(0), 335 * DAY, 3560 * DAY, 3650 * DAY):
        renewal = run(material, NOW + offset, since=NOW)
        assert renewal.wake_at is not None
        assert renewal.wake_at > NOW + offset
