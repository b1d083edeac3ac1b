"""Where the API server is and how to authenticate: kubeconfig files, or the in-cluster ServiceAccount
(``load_configuration``).

Several kubeconfig files (KUBECONFIG=a:b) are merged as kubectl merges them: for each cluster, user and
context name, and for current-context, the first file that sets it wins, with its whole entry; relative
file names are resolved against the directory of the file that holds them; missing files and empty list
elements are skipped. kubernetes-asyncio's own merging differs (current-context from the last file).

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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.runtime.client import StartupError
from shared.jsondict import JSONDict

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD_SECONDS = 60.0  # bound ServiceAccount tokens rotate; client-go re-reads the file each minute
# The file names of each kind of entry, resolved against the directory of the file that holds the entry
_FILE_KEYS = {"clusters": ("cluster", ("certificate-authority",)),
              "users": ("user", ("client-certificate", "client-key", "tokenFile")),
              "contexts": ("context", ())}


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


def read_kubeconfigs(paths: Sequence[Path]) -> JSONDict:
    """The files merged into one kubeconfig as kubectl merges them (see the module's docstring), file names in
    it resolved; KubeconfigError, naming the file when there are several, when one is not a kubeconfig."""
    merged: JSONDict = {"clusters": [], "users": [], "contexts": []}
    for path in paths:
        try:
            document = _read(path)
            if document is not None and not isinstance(document, dict):
                raise KubeconfigError("not a kubeconfig (expected a mapping)")
        except KubeconfigError as error:
            raise KubeconfigError(f"{path}: {error}" if len(paths) > 1 else str(error)) from None
        document = document or {}
        current = document.get("current-context")
        if isinstance(current, str) and current and not merged.get("current-context"):
            merged["current-context"] = current
        for key, (what, files) in _FILE_KEYS.items():
            items = document.get(key)
            names = {item["name"] for item in merged[key]}
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"] not in names:
                    names.add(item["name"])
                    merged[key].append(_resolved(item, what, files, path.parent))
    return merged


def _resolved(item: JSONDict, what: str, files: tuple[str, ...], base: Path) -> JSONDict:
    """The entry with its relative file names (and an exec plugin's command given as a path) under ``base``."""
    entry = item.get(what)
    if not isinstance(entry, dict):
        return item
    entry = dict(entry)
    for key in files:
        if entry.get(key):
            entry[key] = _under(entry[key], base)
    plugin = entry.get("exec")
    if isinstance(plugin, dict) and "/" in str(plugin.get("command", "")):  # kubectl leaves a bare name to PATH
        entry["exec"] = {**plugin, "command": _under(plugin["command"], base)}
    return {**item, what: entry}


def _under(value: Any, base: Path) -> str:
    resolved = Path(str(value)).expanduser()
    return str(resolved if resolved.is_absolute() else base / resolved)


def uses_plugin(document: JSONDict) -> bool:
    """True when the current user of a merged kubeconfig (``read_kubeconfigs``) authenticates through an exec
    or auth-provider plugin."""
    try:
        _, user = _selected(document)
    except KubeconfigError:
        return False
    return "exec" in user or "auth-provider" in user


def client_config(document: JSONDict) -> ClientConfig:
    """The ClientConfig of a merged kubeconfig's current context (``read_kubeconfigs``)."""
    cluster, user = _selected(document)
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise KubeconfigError("the current context's cluster has no server")
    config = ClientConfig(server.rstrip("/"), verify_ssl=not cluster.get("insecure-skip-tls-verify", False))
    config.ssl_ca_cert = _file(cluster, "certificate-authority")
    if cluster.get("certificate-authority-data"):
        config.ca_data = _decoded(cluster["certificate-authority-data"], "certificate-authority-data").decode()
    config.cert_file = _file(user, "client-certificate") or _data_file(user, "client-certificate-data")
    config.key_file = _file(user, "client-key") or _data_file(user, "client-key-data")
    config.token = str(user.get("token") or "")
    config.token_file = _file(user, "tokenFile") or ""
    if bool(config.cert_file) != bool(config.key_file):
        raise KubeconfigError("a client certificate needs both a certificate and a key")
    return config


def _file(entry: JSONDict, key: str) -> str | None:
    """The file an entry names (already resolved by ``read_kubeconfigs``), which must exist."""
    value = entry.get(key)
    if not value:
        return None
    if not Path(str(value)).is_file():
        raise KubeconfigError(f"{key} {value}: no such file")
    return str(value)


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


def kubeconfig_paths(kubeconfig: str) -> list[str]:
    """The kubeconfig files to load, or [] for the in-cluster configuration; StartupError when none works.
    ``kubeconfig`` may list several files separated by ``os.pathsep`` (":"), as KUBECONFIG does for kubectl:
    empty elements are ignored, repeated files read once, missing files skipped; one at least must exist."""
    if kubeconfig:
        listed = list(dict.fromkeys(name for name in kubeconfig.split(os.pathsep) if name))
        found = [name for name in listed if os.path.isfile(name)]
        if found:
            return found
        if len(listed) == 1:
            raise StartupError(f"kubeconfig {listed[0]}: no such file")
        raise StartupError(f"kubeconfig {kubeconfig}: none of these files exists" if listed else
                           f"kubeconfig {kubeconfig!r} names no file")
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.environ.get("KUBERNETES_SERVICE_PORT"):
        return []
    default = os.path.expanduser("~/.kube/config")
    if not os.path.isfile(default):
        raise StartupError(f"no kubeconfig: pass --kubeConfig or set KUBECONFIG ({default} does not exist), "
                           "or run in a cluster (KUBERNETES_SERVICE_HOST is not set)")
    return [default]


async def load_configuration(kubeconfig: str = "", master: str = "") -> Any:
    """A client configuration: from the ``kubeconfig`` file(s) if given, else in-cluster, else ~/.kube/config.
    Raises StartupError naming the problem. Credential plugins (exec, auth-provider) go through
    kubernetes-asyncio's loader; everything else through ours, which costs no memory to speak of."""
    paths = kubeconfig_paths(kubeconfig)
    try:
        if not paths:
            configuration: Any = in_cluster_config()
        else:
            document = read_kubeconfigs([Path(path) for path in paths])
            if uses_plugin(document):
                configuration = await _plugin_configuration(paths, document)
            else:
                configuration = client_config(document)
    except KubeconfigError as error:
        shown = os.pathsep.join(paths)
        raise StartupError(f"kubeconfig {shown} is not usable: {error}" if paths else str(error)) from None
    if master:
        configuration.host = master
    return configuration


async def _plugin_configuration(paths: list[str], document: JSONDict) -> Any:
    """kubernetes-asyncio's configuration: from the one file (a refreshed auth-provider token is written back
    to it), or from the files merged by ``read_kubeconfigs``."""
    from kubernetes_asyncio import config  # noqa: PLC0415  (~60 MiB: only for credential plugins)
    from kubernetes_asyncio.client import Configuration  # noqa: PLC0415

    configuration = Configuration()
    try:
        if len(paths) == 1:
            await config.load_kube_config(config_file=paths[0], client_configuration=configuration)
        else:
            await config.load_kube_config_from_dict(document, client_configuration=configuration)
    except Exception as error:  # the loader raises ConfigException, YAML errors, KeyError, TypeError, OSError
        raise KubeconfigError(" ".join(str(error).split()) or type(error).__name__) from None
    return configuration
