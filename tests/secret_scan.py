"""Find secrets where they must never be: log lines and Kubernetes events.

What counts as a secret: a PEM private key (RSA, EC, PKCS#8, encrypted, OpenSSH), an OpenSSH private key
body, a bearer token (``Authorization: Bearer ...``), a JWT (ServiceAccount tokens are JWTs), any of
them base64-encoded (a Secret's ``data``), and any value the caller knows to be secret (``known``),
verbatim or base64-encoded. Certificates, serials and fingerprints are public and never reported.

Usage::

    from tests.secret_scan import scan_files, scan_events, assert_clean

    findings = scan_files([webhook_log, reconciler_log], known=[secret_data_value])
    findings += scan_events(events)              # dicts of core/v1 or events.k8s.io/v1 Events
    assert_clean(findings)                       # AssertionError listing where, never the secret itself
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = ["Finding", "assert_clean", "scan_events", "scan_files", "scan_text"]

PATTERNS: dict[str, re.Pattern[str]] = {
    "PEM private key": re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"),
    "OpenSSH private key body": re.compile(r"b3BlbnNzaC1rZXktdjE"),  # base64 of the magic "openssh-key-v1"
    "bearer token": re.compile(r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*"),
    "JWT": re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
}
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")
_MIN_KNOWN = 8  # shorter "secrets" would match everywhere


@dataclass(frozen=True)
class Finding:
    """One secret found: where, and what kind. The secret itself is never kept."""

    source: str
    line: int
    kind: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.kind}"


def scan_text(text: str, source: str = "<text>", known: Iterable[str | bytes] = ()) -> list[Finding]:
    """Every secret in ``text``, one finding per (line, kind)."""
    needles = _known_needles(known)
    findings: list[Finding] = []
    for number, line in enumerate(text.splitlines(), start=1):
        kinds = _kinds(line, needles)
        findings += [Finding(source, number, kind) for kind in sorted(kinds)]
    return findings


def scan_files(paths: Iterable[str | Path], known: Iterable[str | bytes] = ()) -> list[Finding]:
    """Scan log files (any encoding; undecodable bytes are replaced); a missing file is an error."""
    known = list(known)
    findings: list[Finding] = []
    for path in paths:
        findings += scan_text(Path(path).read_text(errors="replace"), str(path), known)
    return findings


def scan_events(events: Iterable[Mapping[str, Any]], known: Iterable[str | bytes] = ()) -> list[Finding]:
    """Scan Event objects (every field: message, note, reason, annotations...); ``line`` is the index."""
    needles = _known_needles(known)
    findings: list[Finding] = []
    for index, event in enumerate(events):
        metadata = event.get("metadata")
        meta: Mapping[str, Any] = metadata if isinstance(metadata, Mapping) else {}
        source = f"event {meta.get('namespace', '')}/{meta.get('name', index)}"
        text = orjson.dumps(event, default=str).decode()
        findings += [Finding(source, index, kind) for kind in sorted(_kinds(text, needles))]
    return findings


def assert_clean(findings: Iterable[Finding]) -> None:
    """Fail with the list of places (never the secrets) when anything was found."""
    found = list(findings)
    assert not found, f"{len(found)} secret(s) in logs or events:\n" + "\n".join(map(str, found[:50]))


def _known_needles(known: Iterable[str | bytes]) -> dict[str, str]:
    """Each known secret as text, plus its standard and URL-safe base64 (the forms a Secret's data takes)."""
    needles: dict[str, str] = {}
    for value in known:
        raw = value.encode() if isinstance(value, str) else value
        if len(raw) < _MIN_KNOWN:
            continue
        text = raw.decode(errors="replace")
        for line in text.splitlines() or [text]:  # a multi-line secret leaks line by line too
            if len(line.strip()) >= _MIN_KNOWN and "-----" not in line:
                needles.setdefault(line.strip(), "known secret value")
        needles.setdefault(base64.b64encode(raw).decode()[:-4] or text, "known secret value (base64)")
        needles.setdefault(base64.urlsafe_b64encode(raw).decode()[:-4] or text, "known secret value (base64)")
    return needles


def _kinds(text: str, needles: Mapping[str, str], depth: int = 0) -> set[str]:
    kinds = {kind for kind, pattern in PATTERNS.items() if pattern.search(text)}
    kinds |= {kind for needle, kind in needles.items() if needle in text}
    if depth < 2:  # base64 of a secret, and base64 of base64 (a Secret manifest inside a ConfigMap)
        for run in _BASE64_RUN.findall(text):
            decoded = _b64decode(run)
            if decoded:
                kinds |= {f"{kind} (base64)" if "(base64)" not in kind else kind
                          for kind in _kinds(decoded, needles, depth + 1)}
    return kinds


def _b64decode(run: str) -> str | None:
    """The text a base64 run decodes to (standard or URL-safe alphabet, any padding), or None."""
    compact = run.rstrip("=")
    for offset in range(4):  # the run may start mid-value (a line-wrapped or quoted blob)
        chunk = compact[offset:]
        chunk = chunk[: len(chunk) - len(chunk) % 4] if len(chunk) % 4 != 1 else chunk[:-1]
        if len(chunk) < 16:
            return None
        altchars = b"-_" if ("-" in chunk or "_" in chunk) else b"+/"
        try:
            data = base64.b64decode(chunk + "=" * (-len(chunk) % 4), altchars=altchars, validate=True)
        except (binascii.Error, ValueError):
            continue
        text = data.decode("utf-8", errors="ignore")
        if text and sum(ch.isprintable() or ch.isspace() for ch in text) > 0.8 * len(text):
            return text
    return None
