"""webhook/pem.py reads what cryptography reads from a serving certificate (the webhook no longer imports it)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from webhook.pem import PEMError, leaf_facts, pem_blocks


def certificate(subject: x509.Name, serial: int, not_after: datetime) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(serial).not_valid_before(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
            .not_valid_after(not_after).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


SUBJECTS = {
    "plain": x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mpijob-webhook.mpi-operator.svc")]),
    "escapes": x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ' #a, "b"+c;<d>\\e '),
                          x509.NameAttribute(NameOID.COMMON_NAME, "é")]),
    "multi-valued": x509.Name([x509.RelativeDistinguishedName([
        x509.NameAttribute(NameOID.COMMON_NAME, "x"), x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "y")])]),
    "unknown-oid": x509.Name([x509.NameAttribute(x509.ObjectIdentifier("1.2.3.4.5"), "v")]),
}


@pytest.mark.parametrize("subject", list(SUBJECTS.values()), ids=list(SUBJECTS))
@pytest.mark.parametrize("not_after", [datetime(2049, 12, 31, tzinfo=UTC), datetime(2051, 6, 1, tzinfo=UTC)],
                         ids=["utc-time", "generalized-time"])
def test_leaf_facts_match_cryptography(subject: x509.Name, not_after: datetime) -> None:
    pem = certificate(subject, 0x57FC3ABAA2A5019A5017EA4107B23687DB74377F, not_after)
    [(label, _, der)] = pem_blocks(pem)
    cert = x509.load_pem_x509_certificate(pem)
    facts = leaf_facts(der)
    assert label == "CERTIFICATE"
    assert facts.serial == cert.serial_number
    assert facts.fingerprint_sha256 == cert.fingerprint(hashes.SHA256()).hex()
    assert facts.subject == cert.subject.rfc4514_string()
    assert (facts.not_before, facts.not_after) == (cert.not_valid_before_utc, cert.not_valid_after_utc)


def test_incomplete_or_garbled_blocks() -> None:
    assert pem_blocks(b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n") == []
    with pytest.raises(PEMError, match="not valid base64"):
        pem_blocks(b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    with pytest.raises(PEMError):
        leaf_facts(b"\x30\x03\x02\x01")
