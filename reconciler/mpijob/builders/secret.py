"""The SSH auth Secret ``<job>-ssh`` shared by the launcher and the workers (controller.md 2.3).

The key pair is a parameter (``reconciler.mpijob.sshkeys.generate_ssh_key_pair`` makes one), so building stays pure.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from reconciler.mpijob.builders.child_object import app_labels, object_meta
from shared.api import constants as c
from shared.api import names
from shared.api.types import MPIJob
from shared.jsondict import JSONDict

SSH_AUTH_SECRET_TYPE = "kubernetes.io/ssh-auth"
SSH_SECRET_KEYS = frozenset({c.SSH_PRIVATE_KEY, c.SSH_PUBLIC_KEY})


@dataclass(frozen=True, repr=False)
class SSHKeyPair:
    """A private key as PEM (``-----BEGIN EC PRIVATE KEY-----``) and its public authorized_keys line."""

    private_key_pem: bytes
    authorized_key: bytes

    def __repr__(self) -> str:  # never print key material into logs
        return "SSHKeyPair(<redacted>)"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def build_ssh_secret(job: MPIJob, key_pair: SSHKeyPair) -> JSONDict:
    """Secret ``<job>-ssh`` of type ``kubernetes.io/ssh-auth``; ``data`` values base64-encoded for the API."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": object_meta(job, names.ssh_secret_name(job.name), app_labels(job)),
        "type": SSH_AUTH_SECRET_TYPE,
        "data": {
            c.SSH_PRIVATE_KEY: _b64(key_pair.private_key_pem),
            c.SSH_PUBLIC_KEY: _b64(key_pair.authorized_key),
        },
    }


def ssh_secret_has_key_pair(existing: JSONDict) -> bool:
    """Whether a Secret still holds both halves of its key pair (upstream regenerates whenever its set of
    keys differs; here an extra key alone is removed, never a reason to rotate credentials)."""
    return set(existing.get("data") or {}) >= SSH_SECRET_KEYS


def ssh_secret_data_patch(existing: JSONDict, new_key_pair: SSHKeyPair | None) -> JSONDict | None:
    """The merge-patch ``data`` that leaves exactly the two keys, or None when the Secret already has them.

    ``new_key_pair`` is used only when a half of the pair is missing (``ssh_secret_has_key_pair``).
    """
    data = existing.get("data") or {}
    if set(data) == SSH_SECRET_KEYS:
        return None
    extra = dict.fromkeys((key for key in data if key not in SSH_SECRET_KEYS), None)
    if ssh_secret_has_key_pair(existing):
        return extra
    if new_key_pair is None:
        raise ValueError("the Secret lost a key: a new key pair is needed")
    return {**extra, c.SSH_PRIVATE_KEY: _b64(new_key_pair.private_key_pem),
            c.SSH_PUBLIC_KEY: _b64(new_key_pair.authorized_key)}
