"""SSH key generation: ECDSA P-521, PEM ``EC PRIVATE KEY``, OpenSSH public line without comment; the same
from OpenSSL through ctypes (the reconciler's path under OpenSSL 3) and from cryptography (the fallback)."""

from __future__ import annotations

import ssl
from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from reconciler.mpijob import libcrypto, sshkeys
from reconciler.mpijob.builders.secret import SSHKeyPair

GENERATORS = pytest.mark.parametrize("generate", [sshkeys.generate_ssh_key_pair, sshkeys._cryptography_key_pair],
                                     ids=["default", "cryptography"])


@GENERATORS
def test_key_pair_format_and_match(generate: Callable[[], SSHKeyPair]) -> None:
    pair = generate()
    assert pair.private_key_pem.startswith(b"-----BEGIN EC PRIVATE KEY-----\n")
    assert pair.private_key_pem.endswith(b"-----END EC PRIVATE KEY-----\n")
    private_key = serialization.load_pem_private_key(pair.private_key_pem, password=None)
    assert isinstance(private_key, ec.EllipticCurvePrivateKey)
    assert isinstance(private_key.curve, ec.SECP521R1)
    # SEC1 with the named curve and the public key, as cryptography's TraditionalOpenSSL writes it
    assert pair.private_key_pem == private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption())

    assert pair.authorized_key.startswith(b"ecdsa-sha2-nistp521 AAAA")
    assert pair.authorized_key.endswith(b"\n")
    assert pair.authorized_key.count(b" ") == 1  # no comment
    public_key = serialization.load_ssh_public_key(pair.authorized_key.strip())
    assert isinstance(public_key, ec.EllipticCurvePublicKey)
    assert public_key.public_numbers() == private_key.public_key().public_numbers()
    assert pair.authorized_key == public_key.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH) + b"\n"


@GENERATORS
def test_every_call_makes_a_new_key(generate: Callable[[], SSHKeyPair]) -> None:
    first, second = generate(), generate()
    assert first.private_key_pem != second.private_key_pem
    assert first.authorized_key != second.authorized_key


@pytest.mark.skipif(ssl.OPENSSL_VERSION_INFO < (3,), reason="the ctypes path needs OpenSSL 3")
def test_openssl_3_is_used_through_ssl() -> None:
    assert libcrypto.load() is not None
