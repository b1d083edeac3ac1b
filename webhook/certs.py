"""Serving certificates for the webhook: a private CA and a leaf certificate, ECDSA P-256.

The functions that build certificates are pure apart from key generation: the clock is a parameter.
`python -m webhook.certs --out-dir DIR` writes `ca.crt`, `ca.key`, `tls.crt`, `tls.key` and
`ca-bundle.b64` (the base64 CA PEM for a webhook configuration's `caBundle`).
"""

from __future__ import annotations

import argparse
import base64
import ipaddress
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from shared.cli import positive_int
from shared.logs import configure_logging

logger = logging.getLogger("webhook.certs")

CLOCK_SKEW = timedelta(minutes=5)
"""notBefore is backdated by this much so that nodes with a slightly late clock accept a new cert."""

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY, CA_BUNDLE = "ca.crt", "ca.key", "tls.crt", "tls.key", "ca-bundle.b64"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def generate_key() -> ec.EllipticCurvePrivateKey:
    """Return a fresh ECDSA P-256 private key."""
    return ec.generate_private_key(ec.SECP256R1())


def generate_ca(
    common_name: str, *, days: int, now: datetime, key: ec.EllipticCurvePrivateKey | None = None
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """Build a self-signed CA valid from `now - CLOCK_SKEW` for `days` days; it may sign leaves only."""
    key = key or generate_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    usage = _key_usage(digital_signature=True, key_cert_sign=True, crl_sign=True)
    cert = (
        _validity(x509.CertificateBuilder(), now, now + timedelta(days=days))
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


def issue_serving_cert(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    dns_names: Sequence[str],
    ip_addresses: Sequence[IPAddress],
    *,
    days: int,
    now: datetime,
    key: ec.EllipticCurvePrivateKey | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """Issue a TLS server certificate signed by the CA; it never outlives the CA."""
    if not dns_names and not ip_addresses:
        raise ValueError("a serving certificate needs at least one DNS name or IP address")
    key = key or generate_key()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ip) for ip in ip_addresses]
    common_name = dns_names[0] if dns_names else str(ip_addresses[0])
    not_after = min(now + timedelta(days=days), ca_cert.not_valid_after_utc)
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


def cert_pem(cert: x509.Certificate) -> bytes:
    """PEM encoding of a certificate."""
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """Unencrypted PKCS#8 PEM encoding of a private key."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def write_bundle(
    out_dir: Path,
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    serving: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
) -> None:
    """Write CA and serving pairs plus `ca-bundle.b64` into out_dir; keys 0600, the rest 0644.

    Each file is replaced atomically; the serving key is written before its certificate.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_atomic(out_dir / CA_CERT, cert_pem(ca[0]), 0o644)
    _write_atomic(out_dir / CA_KEY, key_pem(ca[1]), 0o600)
    _write_atomic(out_dir / CA_BUNDLE, ca_bundle_b64(out_dir / CA_CERT).encode() + b"\n", 0o644)
    _write_atomic(out_dir / TLS_KEY, key_pem(serving[1]), 0o600)
    _write_atomic(out_dir / TLS_CERT, cert_pem(serving[0]), 0o644)


def load_ca(out_dir: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """Read `ca.crt`/`ca.key` from out_dir; raise ValueError unless they are a matching EC pair."""
    cert = x509.load_pem_x509_certificate((out_dir / CA_CERT).read_bytes())
    key = serialization.load_pem_private_key((out_dir / CA_KEY).read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{out_dir / CA_KEY}: not an EC private key")
    if key.public_key() != cert.public_key():
        raise ValueError(f"{out_dir / CA_KEY} does not match {out_dir / CA_CERT}")
    return cert, key


def ca_bundle_b64(path: Path, *more: Path) -> str:
    """Base64 of the concatenated CA PEM file(s), the value of a webhook `clientConfig.caBundle`.

    Pass the old CA too while rotating the CA so that both are trusted during the switch.
    """
    return base64.b64encode(b"".join(p.read_bytes() for p in (path, *more))).decode("ascii")


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the process exit status. Logging is configured by the caller."""
    args = build_parser().parse_args(argv)
    out_dir, now = Path(args.out_dir), datetime.now(UTC)
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = None
    if args.reuse_ca:
        try:
            ca = load_ca(out_dir)
        except (OSError, ValueError) as exc:
            error = os_error(exc) if isinstance(exc, OSError) else str(exc)
            logger.error("cannot reuse the CA", extra={"kv": {"out_dir": str(out_dir), "error": error}})
            return 2
    dns = [*service_dns_names(args.service, args.namespace, args.cluster_domain), *args.dns]
    try:
        ca = ca or generate_ca(args.ca_common_name, days=args.ca_days, now=now)
        serving = issue_serving_cert(ca[0], ca[1], dns, args.ip, days=args.days, now=now)
    except (ValueError, OverflowError) as exc:  # a name no certificate can hold, a date past year 9999
        logger.error("cannot build the certificates", extra={"kv": {"error": str(exc) or type(exc).__name__}})
        return 2
    try:
        write_bundle(out_dir, ca, serving)
    except OSError as exc:
        logger.error("cannot write the certificates", extra={"kv": {"out_dir": str(out_dir), "error": os_error(exc)}})
        return 1
    leaf = serving[0]
    kv = {"out_dir": str(out_dir), "reused_ca": bool(args.reuse_ca), "serial": format(leaf.serial_number, "x")}
    kv |= {"not_after": leaf.not_valid_after_utc.isoformat(), "dns": ",".join(dns), "ips": ",".join(map(str, args.ip))}
    logger.info("certificates written", extra={"kv": kv})
    if args.print_ca_bundle:
        print(ca_bundle_b64(out_dir / CA_CERT))
    return 0


def os_error(exc: OSError) -> str:
    """``No such file or directory: /a/b`` rather than ``[Errno 2] No such file or directory: '/a/b'``."""
    if exc.strerror and exc.filename is not None:
        return f"{exc.strerror}: {exc.filename}"
    return str(exc) or type(exc).__name__


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m webhook.certs", description=__doc__.split("\n")[0])
    p.add_argument("--out-dir", required=True, help="directory for ca.crt, ca.key, tls.crt, tls.key")
    p.add_argument("--service", default="mpijob-webhook", help="webhook Service name")
    p.add_argument("--namespace", default="mpi-operator", help="webhook Service namespace")
    p.add_argument("--cluster-domain", default="cluster.local", help="cluster DNS domain ('' to omit)")
    p.add_argument("--dns", action="append", default=[], help="extra DNS SAN (repeatable)")
    p.add_argument("--ip", action="append", default=[], type=ipaddress.ip_address, help="IP SAN (repeatable)")
    p.add_argument("--days", type=positive_int, default=365, help="serving certificate validity (days)")
    p.add_argument("--ca-days", type=positive_int, default=3650, help="CA validity (days)")
    p.add_argument("--ca-common-name", default="mpijob-webhook-ca", help="CA subject common name")
    p.add_argument("--reuse-ca", action="store_true", help="keep the CA in out-dir, re-issue the leaf")
    p.add_argument("--print-ca-bundle", action="store_true", help="print the base64 caBundle on stdout")
    return p


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


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Write via a temporary file in the same directory and rename, so readers never see half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


if __name__ == "__main__":
    configure_logging("info")
    sys.exit(main())
