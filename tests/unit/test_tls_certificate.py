"""What the webhook reports about the pair it serves (``webhook.tls.inspect_pair``, behind the reloader's logs,
``describe()`` and metrics): the leaf's serial, SHA-256 fingerprint, RFC 4514 subject and validity exactly as
cryptography reads them, and one short phrase when the pair cannot be used."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from webhook.tls import CertificateError, inspect_pair

NOT_BEFORE = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def key_pem(key: ec.EllipticCurvePrivateKey,
            encryption: serialization.KeySerializationEncryption | None = None) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             encryption or serialization.NoEncryption())


def certificate(key: ec.EllipticCurvePrivateKey, subject: x509.Name, serial: int, not_after: datetime) -> bytes:
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(serial).not_valid_before(NOT_BEFORE).not_valid_after(not_after)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


SUBJECTS = {
    "plain": x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mpijob-webhook.mpi-operator.svc")]),
    "escapes": x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ' #a, "b"+c;<d>\\e '),
                          x509.NameAttribute(NameOID.COMMON_NAME, "é")]),
    "nul": x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "a\x00b")]),
    "multi-valued": x509.Name([x509.RelativeDistinguishedName([
        x509.NameAttribute(NameOID.COMMON_NAME, "x"), x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "y")])]),
    "unknown-oid": x509.Name([x509.NameAttribute(x509.ObjectIdentifier("1.2.3.4.5"), "v")]),
}


@pytest.mark.parametrize("subject", list(SUBJECTS.values()), ids=list(SUBJECTS))
@pytest.mark.parametrize("not_after", [datetime(2049, 12, 31, tzinfo=UTC), datetime(2051, 6, 1, tzinfo=UTC)],
                         ids=["utc-time", "generalized-time"])
def test_the_leaf_is_reported_as_cryptography_reads_it(subject: x509.Name, not_after: datetime) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    intermediate = certificate(ec.generate_private_key(ec.SECP256R1()), SUBJECTS["plain"], 7, not_after)
    pem = certificate(key, subject, 0x57FC3ABAA2A5019A5017EA4107B23687DB74377F, not_after)
    cert = x509.load_pem_x509_certificate(pem)
    loaded = inspect_pair(pem + intermediate, key_pem(key))  # the leaf comes first; the rest of the chain is served
    assert loaded.serial == cert.serial_number
    assert loaded.serial_hex == "57fc3abaa2a5019a5017ea4107b23687db74377f"
    assert loaded.fingerprint_sha256 == cert.fingerprint(hashes.SHA256()).hex()
    assert loaded.subject == cert.subject.rfc4514_string()
    assert (loaded.not_before, loaded.not_after) == (NOT_BEFORE, not_after)


KEY = ec.generate_private_key(ec.SECP256R1())
CERT = certificate(KEY, SUBJECTS["plain"], 1, datetime(2049, 12, 31, tzinfo=UTC))
GARBAGE = b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n"

BAD_PAIRS = {
    "no-certificate": (b"", key_pem(KEY), "certificate: Unable to load PEM file (MalformedFraming)"),
    "unterminated-certificate": (GARBAGE, key_pem(KEY), "certificate: Unable to load PEM file (MalformedFraming)"),
    "garbled-certificate": (GARBAGE + b"-----END CERTIFICATE-----\n", key_pem(KEY),
                            "certificate: Unable to load PEM file (InvalidData(Invalid padding))"),
    "no-key": (CERT, b"", "private key: Unable to load PEM file (MalformedFraming)"),
    "certificate-as-key": (CERT, CERT, "private key: "),
    "encrypted-key": (CERT, key_pem(KEY, serialization.BestAvailableEncryption(b"secret")),
                      "private key: the key is encrypted; the webhook needs an unencrypted key"),
    "other-key": (CERT, key_pem(ec.generate_private_key(ec.SECP256R1())),
                  "private key does not match the certificate"),
}


@pytest.mark.parametrize(("cert_pem", "key", "message"), list(BAD_PAIRS.values()), ids=list(BAD_PAIRS))
def test_an_unusable_pair_is_one_short_phrase(cert_pem: bytes, key: bytes, message: str) -> None:
    with pytest.raises(CertificateError) as raised:
        inspect_pair(cert_pem, key)
    assert str(raised.value).startswith(message)
    assert "https://" not in str(raised.value)  # cryptography's FAQ link is noise in a one-line message
    assert "\n" not in str(raised.value)
