"""The admin kubeconfig: one cluster, one user (admin, group system:masters), one context."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from .pki import Pki

NAME = "mpijob-local"


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(path: Path, server: str, pki: Pki, cert: Path | None = None, key: Path | None = None,
                     user: str = "admin") -> Path:
    """Write a self-contained kubeconfig (certificates inline) for `user`, by default the admin."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": NAME, "cluster": {"server": server, "certificate-authority-data": _b64(pki.ca_cert)}}],
        "users": [{"name": user, "user": {"client-certificate-data": _b64(cert or pki.admin_cert),
                                          "client-key-data": _b64(key or pki.admin_key)}}],
        "contexts": [{"name": NAME, "context": {"cluster": NAME, "user": user}}],
        "current-context": NAME,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
