"""What the webhook's TLS Secret holds, read leniently: a part that cannot be parsed reads as absent.

Keys (``kubernetes.io/tls`` plus the CA's key): ``tls.crt`` and ``tls.key``, the serving pair, the only two the
webhook pods mount; ``ca.crt``, every CA the API server must trust (newest first: the signing CA, then retired
CAs until they expire), which is exactly what goes into each ``caBundle``; ``ca.key``, the signing CA's key.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from shared.certificates import bundle_pem, cert_pem, is_ca, key_pem, load_ec_key

TLS_CERT, TLS_KEY, CA_CERT, CA_KEY = "tls.crt", "tls.key", "ca.crt", "ca.key"
KEYS = (TLS_CERT, TLS_KEY, CA_CERT, CA_KEY)


@dataclass(frozen=True)
class Material:
    """The four PEM values of the Secret, as bytes (b"" when absent), with parsed views of them."""

    tls_crt: bytes = b""
    tls_key: bytes = b""
    ca_crt: bytes = b""
    ca_key_pem: bytes = b""

    @classmethod
    def from_secret_data(cls, data: Mapping[str, str] | None) -> Material:
        """From a Secret's ``data`` (base64 values); other keys are ignored, undecodable values read as absent."""
        data = data or {}
        return cls(*(_unbase64(data.get(key, "")) for key in KEYS))

    @classmethod
    def build(cls, trusted: tuple[x509.Certificate, ...], ca_key: ec.EllipticCurvePrivateKey | None,
              cert: x509.Certificate | None, key: ec.EllipticCurvePrivateKey | None) -> Material:
        return cls(cert_pem(cert) if cert else b"", key_pem(key) if key else b"", bundle_pem(trusted),
                   key_pem(ca_key) if ca_key else b"")

    def secret_data(self) -> dict[str, str]:
        """The Secret's ``data`` for these values (base64), every key present."""
        values = (self.tls_crt, self.tls_key, self.ca_crt, self.ca_key_pem)
        return {key: base64.b64encode(value).decode("ascii") for key, value in zip(KEYS, values, strict=True)}

    @cached_property
    def trusted(self) -> tuple[x509.Certificate, ...]:
        """The CA certificates of ``ca.crt`` (anything else in it is dropped), in their order."""
        return tuple(c for c in _certificates(self.ca_crt) if is_ca(c))

    @cached_property
    def ca_key(self) -> ec.EllipticCurvePrivateKey | None:
        try:
            return load_ec_key(self.ca_key_pem) if self.ca_key_pem else None
        except ValueError:
            return None

    @cached_property
    def signer(self) -> x509.Certificate | None:
        """The trusted CA whose key ``ca.key`` is: the one that signs new serving certificates."""
        key = self.ca_key
        if key is None:
            return None
        return next((c for c in self.trusted if c.public_key() == key.public_key()), None)

    @cached_property
    def cert(self) -> x509.Certificate | None:
        """The serving certificate: the first of ``tls.crt``."""
        found = _certificates(self.tls_crt)
        return found[0] if found else None

    @cached_property
    def key(self) -> PrivateKeyTypes | None:
        """The serving key, of any type (one made by hand may be RSA)."""
        try:
            return serialization.load_pem_private_key(self.tls_key, password=None) if self.tls_key else None
        except (ValueError, TypeError, UnsupportedAlgorithm):
            return None

    @property
    def pair_matches(self) -> bool:
        """Whether the serving key is the serving certificate's."""
        return self.cert is not None and self.key is not None and self.key.public_key() == self.cert.public_key()


def certificates_of_bundle(value: str) -> list[x509.Certificate]:
    """The certificates of a ``caBundle`` value (base64 of PEM); [] when it holds none or cannot be read."""
    return _certificates(_unbase64(value))


def _certificates(pem: bytes) -> list[x509.Certificate]:
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        return []
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError:
        return []


def _unbase64(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return b""
