"""TLS for the webhook's aiohttp server, with certificate hot reload.

`CertificateReloader` owns one server `ssl.SSLContext` for the whole life of the process. A task polls
the certificate and key files and, when their *contents* change (Kubernetes Secret volumes swap a
symlink, so mtimes are not enough), loads the new pair into that same live context: new connections get
the new certificate, existing connections and in-flight requests are untouched, the listener never
restarts. A pair that is half-written, mismatched or unparsable is validated and rejected before the
live context is touched, so the previous certificate keeps serving; the next change is tried again.

Usage with aiohttp::

    reloader = CertificateReloader(cert_file, key_file, poll_interval=2.0)
    async with reloader:  # watches the files until the block ends
        await web.TCPSite(runner, port=9443, ssl_context=reloader.context).start()
        ...
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization

logger = logging.getLogger("webhook.tls")


class CertificateError(ValueError):
    """The certificate/key pair cannot be used: unparsable, encrypted, or not matching."""


@dataclass(frozen=True)
class LoadedCertificate:
    """What is being served: the leaf certificate of the last pair loaded successfully."""

    serial: int
    fingerprint_sha256: str
    subject: str
    not_before: datetime
    not_after: datetime

    @property
    def serial_hex(self) -> str:
        """The serial number as lowercase hex, as `openssl x509 -serial` shows it."""
        return format(self.serial, "x")


def build_server_context() -> ssl.SSLContext:
    """A server context with secure defaults: TLS >= 1.2, no renegotiation, ALPN `http/1.1` only."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    # HTTP/2 is never offered (CVE-2023-44487 "rapid reset"); the API server speaks HTTP/1.1 to us anyway.
    context.set_alpn_protocols(["http/1.1"])
    return context


def inspect_pair(cert_pem: bytes, key_pem: bytes) -> LoadedCertificate:
    """Parse a PEM chain and an unencrypted PEM key with cryptography; raise CertificateError unless the key
    fits the leaf and OpenSSL loads the pair. The pair is rehearsed on a scratch context: a failed
    ``load_cert_chain`` can leave a context with the new certificate but no key."""
    try:
        leaf = x509.load_pem_x509_certificates(cert_pem)[0]
    except ValueError as exc:
        raise CertificateError(f"certificate: {_short(exc)}") from exc
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError as exc:  # cryptography's word for "encrypted, and no password given"
        raise CertificateError("private key: the key is encrypted; the webhook needs an unencrypted key") from exc
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise CertificateError(f"private key: {_short(exc)}") from exc
    if key.public_key() != leaf.public_key():
        raise CertificateError("private key does not match the certificate")
    try:
        _load_chain(build_server_context(), cert_pem, key_pem)
    except ssl.SSLError as exc:
        raise CertificateError(f"OpenSSL cannot load the pair ({_short(exc)})") from exc
    return LoadedCertificate(serial=leaf.serial_number, fingerprint_sha256=leaf.fingerprint(hashes.SHA256()).hex(),
                             subject=leaf.subject.rfc4514_string(), not_before=leaf.not_valid_before_utc,
                             not_after=leaf.not_valid_after_utc)


def _short(exc: Exception) -> str:
    """The error as one short phrase: cryptography's without its FAQ link (``Unable to load PEM file
    (MalformedFraming)``), OpenSSL's without its source location (``[SSL] PEM lib``)."""
    text = str(exc.args[1]) if isinstance(exc, ssl.SSLError) and len(exc.args) > 1 else str(exc)
    text = re.sub(r" \(_ssl\.c:\d+\)$", "", text or type(exc).__name__)
    return re.sub(r"\. See https?://\S+ for more details\.\s*(.*)$",
                  lambda match: f" ({match.group(1)})" if match.group(1) else "", text)


class CertificateReloader:
    """One live server SSLContext kept in sync with a certificate and key file pair."""

    def __init__(self, cert_file: str | Path, key_file: str | Path, *, poll_interval: float = 2.0) -> None:
        if poll_interval <= 0:
            raise ValueError("poll_interval must be positive")
        self.cert_file, self.key_file = Path(cert_file), Path(key_file)
        self.poll_interval = poll_interval
        self._context = build_server_context()
        self._loaded: LoadedCertificate | None = None
        self._seen: bytes | None = None  # digest of the last contents (or error) observed
        self._task: asyncio.Task[None] | None = None
        self.reload_count = 0
        """Successful loads, the first one included."""
        self.failure_count = 0
        """Observed file states that could not be loaded (each distinct state counts once)."""
        self.last_error: str | None = None

    @property
    def context(self) -> ssl.SSLContext:
        """The live server context; pass it to the aiohttp site once, it is updated in place."""
        return self._context

    @property
    def ready(self) -> bool:
        """True once a certificate has been loaded (it stays loaded; later failures keep it)."""
        return self._loaded is not None

    @property
    def loaded(self) -> LoadedCertificate | None:
        """The certificate being served to new connections, if any."""
        return self._loaded

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary for health endpoints and metrics."""
        cert = self._loaded
        return {
            "ready": self.ready,
            "serial": cert.serial_hex if cert else None,
            "fingerprintSHA256": cert.fingerprint_sha256 if cert else None,
            "notAfter": cert.not_after.isoformat() if cert else None,
            "reloads": self.reload_count,
            "failures": self.failure_count,
            "lastError": self.last_error,
        }

    def reload(self, *, log_failure: bool = True) -> bool:
        """Load the files if their contents changed since the last call; True when a new pair went live.

        Never raises for bad or missing files: it logs a warning once per distinct bad state (unless
        ``log_failure`` is false: the caller reports ``last_error`` itself) and keeps serving the
        previous certificate.
        """
        try:
            cert_pem, key_pem = self._read_pair()
        except OSError as exc:
            error = f"{exc.strerror}: {exc.filename}" if exc.strerror and exc.filename else str(exc)
            return self._reject(hashlib.sha256(repr(exc).encode()).digest(), f"read failed: {error}", log_failure)
        digest = hashlib.sha256(hashlib.sha256(cert_pem).digest() + hashlib.sha256(key_pem).digest()).digest()
        if digest == self._seen:
            return False
        try:
            cert = inspect_pair(cert_pem, key_pem)  # rehearsed on a scratch context: the live one only sees
            _load_chain(self._context, cert_pem, key_pem)  # a pair known to load
        except (CertificateError, ssl.SSLError, OSError) as exc:
            return self._reject(digest, str(exc), log_failure)
        self._seen, self._loaded, self.last_error = digest, cert, None
        self.reload_count += 1
        kv = {"serial": cert.serial_hex, "sha256": cert.fingerprint_sha256, "not_after": cert.not_after.isoformat()}
        logger.info("tls certificate loaded", extra={"kv": {**self._files(), **kv, "reloads": self.reload_count}})
        return True

    def _read_pair(self) -> tuple[bytes, bytes]:
        """The two files as one consistent pair: the certificate is read again after the key, and the pair read anew
        while it changed under us (kubelet swapping the Secret volume between the two reads), at most three times;
        so a rotation is not counted as a failed load because of an unlucky instant."""
        cert_pem, key_pem = self.cert_file.read_bytes(), self.key_file.read_bytes()
        for _ in range(3):
            again = self.cert_file.read_bytes()
            if again == cert_pem:
                break
            cert_pem, key_pem = again, self.key_file.read_bytes()
        return cert_pem, key_pem

    async def start(self) -> None:
        """Load the pair once and start watching; a failed first load leaves `ready` false, no raise."""
        if self._task is not None:
            return
        self.reload()
        self._task = asyncio.create_task(self._watch(), name="tls-certificate-reloader")

    async def stop(self) -> None:
        """Stop watching; the context keeps serving the last certificate."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> Self:
        """Start watching (``start``); the block's end stops it (``stop``)."""
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                self.reload()
            except Exception:  # the watcher must outlive any surprise; the old certificate keeps serving
                logger.exception("tls certificate reload crashed", extra={"kv": self._files()})

    def _files(self) -> dict[str, str]:
        return {"cert_file": str(self.cert_file), "key_file": str(self.key_file)}

    def _reject(self, digest: bytes, error: str, log: bool = True) -> bool:
        if digest != self._seen:
            self._seen, self.last_error = digest, error
            self.failure_count += 1
            if not log:
                return False
            kv = {**self._files(), "serving_serial": self._loaded.serial_hex if self._loaded else None}
            logger.warning("tls certificate not loaded, keeping the previous one", extra={"kv": {**kv, "error": error}})
        return False


def _load_chain(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """`load_cert_chain` from bytes, so the pair loaded is exactly the pair validated."""
    with _as_paths(cert_pem, key_pem) as (cert_path, key_path):
        context.load_cert_chain(cert_path, key_path, password=_no_password)


def _no_password() -> bytes:
    """Never a terminal prompt from OpenSSL: an encrypted key fails to load instead."""
    return b""


@contextlib.contextmanager
def _as_paths(*blobs: bytes) -> Iterator[list[str]]:
    """Expose byte strings as readable paths: anonymous memory files on Linux, else a private temp dir."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fds: list[int] = []
        try:
            for blob in blobs:
                fds.append(os.memfd_create("webhook-tls", os.MFD_CLOEXEC))
                with open(fds[-1], "wb", closefd=False) as f:
                    f.write(blob)
            yield [f"/proc/self/fd/{fd}" for fd in fds]
        finally:
            for fd in fds:
                os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="webhook-tls-") as tmp:
        paths = [Path(tmp, str(i)) for i in range(len(blobs))]
        for path, blob in zip(paths, blobs, strict=True):
            path.write_bytes(blob)
        yield [str(p) for p in paths]
