"""X.509 building blocks for the webhook's serving certificates: a private CA and leaf certificates, ECDSA P-256.

Shared by ``python -m webhook.certs`` (files for an admin) and the reconciler's certificate rotation
(``reconciler/certs``), whose images hold no other common package. Pure apart from key generation and the serial
numbers: the clock is a parameter, and so is the key when a caller wants one of its own.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Sequence
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CLOCK_SKEW = timedelta(minutes=5)
"""notBefore is backdated by this much so that nodes with a slightly late clock accept a new cert."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
CA_COMMON_NAME = "mpijob-webhook-ca"


def generate_key() -> ec.EllipticCurvePrivateKey:
    """Return a fresh ECDSA P-256 private key."""
    return ec.generate_private_key(ec.SECP256R1())


def build_ca(
    common_name: str, *, validity: timedelta, now: datetime, key: ec.EllipticCurvePrivateKey | None = None
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A self-signed CA valid from `now - CLOCK_SKEW` for `validity`; it may sign leaves only (path length 0)."""
    key = key or generate_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    usage = _key_usage(digital_signature=True, key_cert_sign=True, crl_sign=True)
    cert = (
        _validity(x509.CertificateBuilder(), now, now + validity)
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def build_serving_cert(  # noqa: PLR0913  the CA, the names and addresses, then validity, now and key keyword-only
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    dns_names: Sequence[str],
    ip_addresses: Sequence[IPAddress] = (),
    *,
    validity: timedelta,
    now: datetime,
    key: ec.EllipticCurvePrivateKey | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A TLS server certificate signed by the CA, valid for `validity` but never beyond the CA."""
    if not dns_names and not ip_addresses:
        raise ValueError("a serving certificate needs at least one DNS name or IP address")
    key = key or generate_key()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ip) for ip in ip_addresses]
    common_name = dns_names[0] if dns_names else str(ip_addresses[0])
    not_after = min(now + validity, ca_cert.not_valid_after_utc)
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (
        _validity(x509.CertificateBuilder(), now, not_after)
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def service_dns_names(service: str, namespace: str, cluster_domain: str = "cluster.local") -> list[str]:
    """The names a Service is reached by: `svc`, `svc.ns`, `svc.ns.svc`, `svc.ns.svc.<domain>`."""
    names = [service, f"{service}.{namespace}", f"{service}.{namespace}.svc"]
    return [*names, f"{service}.{namespace}.svc.{cluster_domain}"] if cluster_domain else names


def dns_names_of(cert: x509.Certificate) -> list[str]:
    """The DNS names of a certificate's subjectAltName extension ([] without one)."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return list(san.get_values_for_type(x509.DNSName))


def is_ca(cert: x509.Certificate) -> bool:
    """Whether the certificate may sign others (basicConstraints CA:TRUE)."""
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """Whether `ca` signed `cert` (its name and its signature)."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def fingerprint(cert: x509.Certificate) -> str:
    """The SHA-256 fingerprint as lowercase hex, as logs and ``openssl x509 -fingerprint -sha256`` name a cert."""
    return cert.fingerprint(hashes.SHA256()).hex()


def cert_pem(cert: x509.Certificate) -> bytes:
    """PEM encoding of a certificate."""
    return cert.public_bytes(serialization.Encoding.PEM)


def bundle_pem(certs: Sequence[x509.Certificate]) -> bytes:
    """The PEM encodings of several certificates, one after another (a webhook `caBundle` before base64)."""
    return b"".join(cert_pem(c) for c in certs)


def ca_bundle_b64(pem: bytes) -> str:
    """Base64 of PEM certificates: the value of a webhook's `clientConfig.caBundle`."""
    return base64.b64encode(pem).decode("ascii")


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """Unencrypted PKCS#8 PEM encoding of a private key."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def load_ec_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    """An unencrypted PEM EC private key; ValueError for anything else."""
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError as exc:  # encrypted
        raise ValueError("the key is encrypted") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("not an EC private key")
    return key


def _validity(builder: x509.CertificateBuilder, now: datetime, until: datetime) -> x509.CertificateBuilder:
    return builder.not_valid_before(now - CLOCK_SKEW).not_valid_after(until)


def _key_usage(
    *, digital_signature: bool = False, key_cert_sign: bool = False, crl_sign: bool = False
) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )
