"""SSH key generation: ECDSA P-521, PEM ``EC PRIVATE KEY``, OpenSSH public line without comment."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from reconciler.mpijob.sshkeys import generate_ssh_key_pair


def test_key_pair_format_and_match() -> None:
    pair = generate_ssh_key_pair()
    assert pair.private_key_pem.startswith(b"-----BEGIN EC PRIVATE KEY-----\n")
    assert pair.private_key_pem.endswith(b"-----END EC PRIVATE KEY-----\n")
    private_key = serialization.load_pem_private_key(pair.private_key_pem, password=None)
    assert isinstance(private_key, ec.EllipticCurvePrivateKey)
    assert isinstance(private_key.curve, ec.SECP521R1)

    assert pair.authorized_key.startswith(b"ecdsa-sha2-nistp521 AAAA")
    assert pair.authorized_key.endswith(b"\n")
    assert pair.authorized_key.count(b" ") == 1  # no comment
    public_key = serialization.load_ssh_public_key(pair.authorized_key.strip())
    assert isinstance(public_key, ec.EllipticCurvePublicKey)
    assert public_key.public_numbers() == private_key.public_key().public_numbers()


def test_every_call_makes_a_new_key() -> None:
    first, second = generate_ssh_key_pair(), generate_ssh_key_pair()
    assert first.private_key_pem != second.private_key_pem
    assert first.authorized_key != second.authorized_key
