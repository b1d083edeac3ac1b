"""Where the API server is and how to authenticate: a kubeconfig file, or the in-cluster ServiceAccount
(``load_configuration``).

Importing kubernetes-asyncio's loader costs about 60 MiB of memory (it imports every generated API
model), more than the rest of the reconciler together. This module reads the kubeconfig forms a
controller meets (server, CA, client certificate, bearer token or token file, in-cluster token) itself
and hands only the rest (``exec`` and ``auth-provider`` credential plugins) to kubernetes-asyncio's
loader, imported then and only then.
"""

from __future__ import annotations

import atexit
import base64
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.runtime.client import StartupError
from shared.jsondict import JSONDict

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD_SECONDS = 60.0  # bound ServiceAccount tokens rotate; client-go re-reads the file each minute


class KubeconfigError(ValueError):
    """The kubeconfig cannot be used, with the reason."""


@dataclass
class ClientConfig:
    """What ``KubeClient`` needs: the attributes kubernetes-asyncio's Configuration has, and no more."""

    host: str
    ssl_ca_cert: str | None = None
    ca_data: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_ssl: bool = True
    token: str = ""
    token_file: str = ""
    _read_at: float = field(default=0.0, repr=False)

    async def auth_settings(self) -> JSONDict:
        self.reread_token()
        return {"BearerToken": {"value": f"Bearer {self.token}"}} if self.token else {}


    def reread_token(self) -> None:
        """Read the token file again when the last read is a minute old (a rotated token is picked up)."""
        if self.token_file and time.monotonic() - self._read_at > TOKEN_REREAD_SECONDS:
            self.token = Path(self.token_file).read_text().strip()
            self._read_at = time.monotonic()


def in_cluster_config() -> ClientConfig:
    host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
    token = SERVICE_ACCOUNT_DIR / "token"
    if not token.is_file():
        raise KubeconfigError(f"in-cluster configuration: {token} does not exist")
    host = f"[{host}]" if ":" in host else host
    return ClientConfig(f"https://{host}:{port}", ssl_ca_cert=str(SERVICE_ACCOUNT_DIR / "ca.crt"),
                        token_file=str(token))


def _named(items: Any, name: str, what: str) -> JSONDict:
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name and isinstance(item.get(what), dict):
            entry: JSONDict = item[what]
            return entry
    raise KubeconfigError(f"no {what} named {name!r}")


def _selected(document: Any) -> tuple[JSONDict, JSONDict]:
    """The cluster and user entries of the current context."""
    if not isinstance(document, dict):
        raise KubeconfigError("not a kubeconfig (expected a mapping)")
    current = document.get("current-context")
    if not isinstance(current, str) or not current:
        raise KubeconfigError("it names no current-context")
    context = _named(document.get("contexts"), current, "context")
    cluster = _named(document.get("clusters"), str(context.get("cluster", "")), "cluster")
    user = _named(document.get("users"), str(context.get("user", "")), "user") if context.get("user") else {}
    return cluster, user


def _read(path: Path) -> Any:
    """The kubeconfig as YAML; KubeconfigError when it is not. PyYAML (about 1 MiB) is imported by the first
    call: a reconciler running in its cluster reads no kubeconfig."""
    import yaml  # noqa: PLC0415

    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise KubeconfigError(" ".join(str(error).split())) from None


def needs_plugin(path: Path) -> bool:
    """True when the current user authenticates through an exec or auth-provider plugin."""
    try:
        _, user = _selected(_read(path))
    except KubeconfigError:
        return False
    return "exec" in user or "auth-provider" in user


def load_kubeconfig(path: Path) -> ClientConfig:
    """The ClientConfig of the kubeconfig's current context; KubeconfigError when it cannot work."""
    cluster, user = _selected(_read(path))
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise KubeconfigError("the current context's cluster has no server")
    base = path.parent
    config = ClientConfig(server.rstrip("/"), verify_ssl=not cluster.get("insecure-skip-tls-verify", False))
    config.ssl_ca_cert = _file(cluster, "certificate-authority", base)
    if cluster.get("certificate-authority-data"):
        config.ca_data = _decoded(cluster["certificate-authority-data"], "certificate-authority-data").decode()
    config.cert_file = _file(user, "client-certificate", base) or _data_file(user, "client-certificate-data")
    config.key_file = _file(user, "client-key", base) or _data_file(user, "client-key-data")
    config.token = str(user.get("token") or "")
    config.token_file = _file(user, "tokenFile", base) or ""
    if bool(config.cert_file) != bool(config.key_file):
        raise KubeconfigError("a client certificate needs both a certificate and a key")
    return config


def _file(entry: JSONDict, key: str, base: Path) -> str | None:
    value = entry.get(key)
    if not value:
        return None
    resolved = Path(str(value)).expanduser()
    resolved = resolved if resolved.is_absolute() else base / resolved
    if not resolved.is_file():
        raise KubeconfigError(f"{key} {resolved}: no such file")
    return str(resolved)


def _decoded(value: Any, key: str) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except ValueError:
        raise KubeconfigError(f"{key} is not base64") from None


_private_dir: list[str] = []


def _data_file(entry: JSONDict, key: str) -> str | None:
    """Inline PEM data written to a private file (the ssl module loads client certificates from files)."""
    if not entry.get(key):
        return None
    if not _private_dir:
        _private_dir.append(tempfile.mkdtemp(prefix="mpi-operator-"))
        atexit.register(shutil.rmtree, _private_dir[0], True)
    target = Path(_private_dir[0]) / key
    target.touch(mode=0o600)
    target.write_bytes(_decoded(entry[key], key))
    return str(target)


def kubeconfig_path(kubeconfig: str) -> str:
    """The kubeconfig file to load, or "" for the in-cluster configuration; StartupError when none works."""
    if kubeconfig:
        if not os.path.isfile(kubeconfig):
            raise StartupError(f"kubeconfig {kubeconfig}: no such file")
        return kubeconfig
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.environ.get("KUBERNETES_SERVICE_PORT"):
        return ""
    default = os.path.expanduser("~/.kube/config")
    if not os.path.isfile(default):
        raise StartupError(f"no kubeconfig: pass --kubeConfig or set KUBECONFIG ({default} does not exist), "
                           "or run in a cluster (KUBERNETES_SERVICE_HOST is not set)")
    return default


async def load_configuration(kubeconfig: str = "", master: str = "") -> Any:
    """A client configuration: from ``kubeconfig`` if given, else in-cluster, else ~/.kube/config.
    Raises StartupError naming the problem. Credential plugins (exec, auth-provider) go through
    kubernetes-asyncio's loader; everything else through ours, which costs no memory to speak of."""
    path = kubeconfig_path(kubeconfig)
    try:
        if not path:
            configuration: Any = in_cluster_config()
        elif needs_plugin(Path(path)):
            configuration = await _plugin_configuration(path)
        else:
            configuration = load_kubeconfig(Path(path))
    except KubeconfigError as error:
        raise StartupError(f"kubeconfig {path} is not usable: {error}" if path else str(error)) from None
    if master:
        configuration.host = master
    return configuration


async def _plugin_configuration(path: str) -> Any:
    from kubernetes_asyncio import config  # noqa: PLC0415  (~60 MiB: only for credential plugins)
    from kubernetes_asyncio.client import Configuration  # noqa: PLC0415

    configuration = Configuration()
    try:
        await config.load_kube_config(config_file=path, client_configuration=configuration)
    except Exception as error:  # the loader raises ConfigException, YAML errors, KeyError, TypeError, OSError
        raise KubeconfigError(" ".join(str(error).split()) or type(error).__name__) from None
    return configuration
