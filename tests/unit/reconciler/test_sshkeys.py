"""SSH key generation: ECDSA P-521, PEM ``EC PRIVATE KEY``, OpenSSH public line without comment, made by
cryptography (no C bindings of our own on the credential path)."""

from __future__ import annotations

import subprocess
import sys

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from reconciler.mpijob import sshkeys


def test_key_pair_format_and_match() -> None:
    pair = sshkeys.generate_ssh_key_pair()
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


def test_every_call_makes_a_new_key() -> None:
    first, second = sshkeys.generate_ssh_key_pair(), sshkeys.generate_ssh_key_pair()
    assert first.private_key_pem != second.private_key_pem
    assert first.authorized_key != second.authorized_key


def test_keys_come_from_cryptography_imported_by_the_first_key() -> None:
    """Not from a ctypes binding of libcrypto: a mistyped C signature there would corrupt memory on the
    credential path. cryptography is loaded by the first key, not at start."""
    code = ("import sys\n"
            "from reconciler.mpijob.sshkeys import generate_ssh_key_pair\n"
            "before = 'cryptography' in sys.modules\n"
            "generate_ssh_key_pair()\n"
            "print(before, 'cryptography' in sys.modules, 'ctypes' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.split() == ["False", "True", "False"]
