"""SSH key generation: the one place in the reconciler with randomness.

Upstream makes a fresh ECDSA P-521 key per MPIJob: the private key as a PEM ``EC PRIVATE KEY`` block
(SEC1 / "traditional OpenSSL"), the public key as an OpenSSH authorized_keys line without a comment.
"""

from __future__ import annotations

from reconciler.mpijob.builders.secret import SSHKeyPair

__all__ = ["SSHKeyPair", "generate_ssh_key_pair"]


def generate_ssh_key_pair() -> SSHKeyPair:
    """A new random ECDSA P-521 key pair, encoded as the Secret stores it.

    cryptography is imported by the first call, not at start: an idle reconciler that has made no key yet
    does not carry its ~9 MiB.
    """
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415

    private_key = ec.generate_private_key(ec.SECP521R1())
    private_pem = private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public_line = private_key.public_key().public_bytes(
        serialization.Encoding.OpenSSH,
        serialization.PublicFormat.OpenSSH,
    )
    return SSHKeyPair(private_key_pem=private_pem, authorized_key=public_line + b"\n")
