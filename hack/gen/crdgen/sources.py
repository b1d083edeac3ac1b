"""Where the core/v1 OpenAPI v3 document comes from: the Go module k8s.io/kubernetes, a file, or a live API server."""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import ssl
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from hack.gen.crdgen.structural import POD_TEMPLATE_SPEC

Schema = dict[str, Any]

K8S_VERSION = "v1.36.3"
K8S_MODULE = "k8s.io/kubernetes"
MODULE_OPENAPI_FILE = "api/openapi-spec/v3/api__v1_openapi.json"
SERVER_OPENAPI_PATH = "/openapi/v3/api/v1"


class SourceError(Exception):
    """The OpenAPI document could not be obtained: no go command, no module, unreachable server."""



def module_openapi_file(version: str = K8S_VERSION) -> Path:
    """Path of the core/v1 OpenAPI v3 file inside the k8s.io/kubernetes module (downloaded if needed)."""
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            proc = subprocess.run(
                ["go", "mod", "download", "-json", f"{K8S_MODULE}@{version}"],
                cwd=tmp, env=env, capture_output=True, text=True, check=False,
            )
        except FileNotFoundError as exc:
            raise SourceError("the go command is not installed") from exc
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        info = {}
    if proc.returncode != 0 or not info.get("Dir"):
        detail = info.get("Error") or proc.stderr.strip() or f"exit status {proc.returncode}"
        raise SourceError(f"go mod download {K8S_MODULE}@{version} failed: {detail}")
    return Path(info["Dir"]) / MODULE_OPENAPI_FILE


def load_openapi_file(path: Path) -> dict[str, Schema]:
    """The component schemas of a core/v1 OpenAPI v3 document stored in `path`."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SourceError(f"cannot read {path}: {exc}") from exc
    return component_schemas(doc, str(path))


def component_schemas(doc: Any, origin: str) -> dict[str, Schema]:
    """`components.schemas` of an OpenAPI v3 document, which must describe core/v1."""
    schemas = doc.get("components", {}).get("schemas") if isinstance(doc, dict) else None
    if not isinstance(schemas, dict) or POD_TEMPLATE_SPEC not in schemas:
        raise SourceError(f"{origin} is not the core/v1 OpenAPI v3 document (no {POD_TEMPLATE_SPEC})")
    return schemas


def fetch_from_server(kubeconfig: Path, expected_version: str) -> dict[str, Schema]:
    """The core/v1 component schemas served by the API server of the kubeconfig's current context."""
    cluster, user = _current_context(kubeconfig)
    server = str(cluster.get("server", "")).rstrip("/")
    if not server:
        raise SourceError(f"{kubeconfig}: the current context's cluster has no server")
    with tempfile.TemporaryDirectory() as tmp:  # private (0700) directory for embedded keys
        try:
            opener = _opener(server, _ssl_context(cluster, user, kubeconfig.parent, Path(tmp)))
            headers = _auth_headers(user, kubeconfig.parent)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError, bad base64 a ValueError
            raise SourceError(f"{kubeconfig}: unusable credentials: {exc}") from exc
        version = _get_json(opener, server + "/version", headers).get("gitVersion")
        if version != expected_version:
            print(f"gen_crd: warning: the server runs {version}, not {expected_version}", file=sys.stderr)
        doc = _get_json(opener, server + SERVER_OPENAPI_PATH, headers)
    return component_schemas(doc, server + SERVER_OPENAPI_PATH)


def _current_context(path: Path) -> tuple[Schema, Schema]:
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SourceError(f"cannot read kubeconfig {path}: {exc}") from exc
    context = _named(config.get("contexts"), config.get("current-context"), "context")
    cluster = _named(config.get("clusters"), context.get("cluster"), "cluster")
    user = _named(config.get("users"), context["user"], "user") if context.get("user") else {}
    return cluster, user


def _named(entries: Any, name: Any, kind: str) -> Schema:
    for entry in entries or []:
        if entry.get("name") == name:
            value = entry.get(kind) or {}
            return value if isinstance(value, dict) else {}
    raise SourceError(f"kubeconfig: no {kind} named {name!r}")


def _material(section: Schema, key: str, base: Path, tmp: Path) -> str | None:
    """A PEM file for `<key>-data` (written into `tmp`) or `<key>` (relative to the kubeconfig)."""
    data = section.get(f"{key}-data")
    if data:
        target = tmp / key
        target.write_bytes(base64.b64decode(data))
        return str(target)
    path = section.get(key)
    return str(base / path) if path else None


def _ssl_context(cluster: Schema, user: Schema, base: Path, tmp: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=_material(cluster, "certificate-authority", base, tmp))
    if cluster.get("insecure-skip-tls-verify"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert = _material(user, "client-certificate", base, tmp)
    if cert:
        context.load_cert_chain(cert, _material(user, "client-key", base, tmp))
    return context


def _auth_headers(user: Schema, base: Path) -> dict[str, str]:
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = (base / user["tokenFile"]).read_text(encoding="utf-8").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


def _opener(server: str, context: ssl.SSLContext) -> urllib.request.OpenerDirector:
    """An opener that, like client-go, never sends loopback traffic through an HTTP(S) proxy."""
    host = urllib.parse.urlsplit(server).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    handlers: list[urllib.request.BaseHandler] = [urllib.request.HTTPSHandler(context=context)]
    if loopback:
        handlers.append(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener(*handlers)


def _get_json(opener: urllib.request.OpenerDirector, url: str, headers: dict[str, str]) -> Any:
    request = urllib.request.Request(url, headers={"Accept": "application/json", **headers})
    try:
        with opener.open(request, timeout=60) as response:
            return json.loads(response.read())
    except (OSError, ValueError) as exc:  # urllib.error.URLError is an OSError
        raise SourceError(f"GET {url} failed: {exc}") from exc
