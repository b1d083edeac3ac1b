"""The few facts the webhook needs from its PEM serving certificate, read without the cryptography package.

The webhook only serves the pair OpenSSL loads (``ssl.SSLContext.load_cert_chain`` checks the key against
the certificate); it reads the leaf's serial number, subject, validity and SHA-256 fingerprint for its
logs and metrics. A small DER reader does that in a few microseconds, where importing cryptography's
x509 and serialization modules would cost about 8 MiB of resident memory in an otherwise idle process.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime

_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", re.DOTALL)
_NAMES = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.9": "STREET", "2.5.4.10": "O",
          "2.5.4.11": "OU", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID"}
_TIME_TAGS = {0x17: "%y%m%d%H%M%SZ", 0x18: "%Y%m%d%H%M%SZ"}  # UTCTime, GeneralizedTime
_STRING_TAGS = {0x0C: "utf-8", 0x13: "ascii", 0x16: "ascii", 0x14: "latin-1", 0x1E: "utf-16-be", 0x1C: "utf-32-be"}


class PEMError(ValueError):
    """Not a PEM block of the kind expected, or not DER inside."""


@dataclass(frozen=True)
class LeafFacts:
    serial: int
    fingerprint_sha256: str
    subject: str
    not_before: datetime
    not_after: datetime


def pem_blocks(data: bytes) -> list[tuple[str, bytes, bytes]]:
    """(label, headers-and-base64 text, DER) of every complete PEM block; PEMError for undecodable base64."""
    blocks = []
    for match in _BLOCK.finditer(data):
        body = match.group(2)
        lines = [line for line in body.splitlines() if line.strip() and b":" not in line]  # skip RFC 1421 headers
        try:
            der = base64.b64decode(b"".join(line.strip() for line in lines), validate=True)
        except binascii.Error as exc:
            raise PEMError(f"{match.group(1).decode()} block is not valid base64 ({exc})") from None
        blocks.append((match.group(1).decode(), body, der))
    return blocks


def _tlv(data: bytes, at: int) -> tuple[int, int, int]:
    """(tag, start of the value, end of the value) of the DER element at ``at``."""
    if at + 2 > len(data):
        raise PEMError("truncated DER")
    tag, length = data[at], data[at + 1]
    at += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or at + count > len(data):
            raise PEMError("unsupported DER length")
        length, at = int.from_bytes(data[at:at + count], "big"), at + count
    if at + length > len(data):
        raise PEMError("truncated DER")
    return tag, at, at + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    items = []
    while start < end:
        item = _tlv(data, start)
        items.append(item)
        start = item[2]
    return items


def leaf_facts(der: bytes) -> LeafFacts:
    """Serial, subject (RFC 4514), validity and fingerprint of a DER X.509 certificate; PEMError if malformed."""
    tag, start, end = _tlv(der, 0)
    if tag != 0x30:
        raise PEMError("not an X.509 certificate")
    tbs_tag, tbs_start, tbs_end = _children(der, start, end)[0]
    fields = _children(der, tbs_start, tbs_end)
    if tbs_tag != 0x30 or not fields:
        raise PEMError("not an X.509 certificate")
    if fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    if len(fields) < 5 or fields[0][0] != 0x02 or fields[3][0] != 0x30 or fields[4][0] != 0x30:
        raise PEMError("not an X.509 certificate")
    (_, s_start, s_end), _, _, (_, v_start, v_end), (_, n_start, n_end) = fields[:5]
    validity = _children(der, v_start, v_end)
    if len(validity) != 2:
        raise PEMError("malformed validity")
    return LeafFacts(
        serial=int.from_bytes(der[s_start:s_end], "big", signed=True),
        fingerprint_sha256=hashlib.sha256(der).hexdigest(),
        subject=_rfc4514(der, n_start, n_end),
        not_before=_time(der, *validity[0]),
        not_after=_time(der, *validity[1]),
    )


def _time(der: bytes, tag: int, start: int, end: int) -> datetime:
    if tag not in _TIME_TAGS:
        raise PEMError("malformed validity")
    try:
        return datetime.strptime(der[start:end].decode("ascii"), _TIME_TAGS[tag]).replace(tzinfo=UTC)
    except (UnicodeDecodeError, ValueError):
        raise PEMError("malformed validity") from None


def _rfc4514(der: bytes, start: int, end: int) -> str:
    """A Name as RFC 4514 text: the last RDN first, multi-valued RDNs joined with ``+``."""
    rdns = []
    for _, set_start, set_end in _children(der, start, end):
        parts = []
        for _, a_start, a_end in _children(der, set_start, set_end):
            (_, o_start, o_end), (v_tag, v_start, v_end) = _children(der, a_start, a_end)[:2]
            oid = _oid(der[o_start:o_end])
            raw = der[v_start:v_end]
            value = raw.decode(_STRING_TAGS[v_tag], "replace") if v_tag in _STRING_TAGS else "#" + raw.hex()
            parts.append(f"{_NAMES.get(oid, oid)}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(reversed(rdns))


def _oid(raw: bytes) -> str:
    if not raw:
        return ""
    arcs, value = [], 0
    for byte in raw[1:]:
        value = value << 7 | byte & 0x7F
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = raw[0]
    head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    return ".".join(str(arc) for arc in head + arcs)


def _escape(value: str) -> str:
    escaped = "".join("\\" + ch if ch in '\\",+;<>' else ch for ch in value)
    if escaped[:1] in ("#", " "):
        escaped = "\\" + escaped
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "\\ "
    return escaped
