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
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from shared.certificates import (
    CLOCK_SKEW,
    IPAddress,
    build_ca,
    build_serving_cert,
    cert_pem,
    generate_key,
    key_pem,
    service_dns_names,
)
from shared.cli import positive_int
from shared.logs import configure_logging

__all__ = ["CLOCK_SKEW", "cert_pem", "generate_ca", "generate_key", "issue_serving_cert", "key_pem", "main",
           "service_dns_names"]
logger = logging.getLogger("webhook.certs")

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY, CA_BUNDLE = "ca.crt", "ca.key", "tls.crt", "tls.key", "ca-bundle.b64"


def generate_ca(
    common_name: str, *, days: int, now: datetime, key: ec.EllipticCurvePrivateKey | None = None
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """Build a self-signed CA valid from `now - CLOCK_SKEW` for `days` days; it may sign leaves only."""
    return build_ca(common_name, validity=timedelta(days=days), now=now, key=key)


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
    return build_serving_cert(ca_cert, ca_key, dns_names, ip_addresses, validity=timedelta(days=days), now=now,
                              key=key)


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
