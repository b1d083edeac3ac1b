"""A very small REST client for the harness' own needs (nodes, CRDs, readiness), on the standard library.

It authenticates with the admin client certificate and verifies the apiserver against the harness CA.
Tests should use kubectl or the project's own client instead.
"""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .wait import HarnessError

JSON = dict[str, Any]


class ApiError(HarnessError):
    """A non-2xx answer from the apiserver."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


def client_context(ca_file: Path, cert_file: Path, key_file: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca_file))
    ctx.load_cert_chain(str(cert_file), str(key_file))
    return ctx


class RestClient:
    """JSON over HTTPS to one apiserver; one connection per request (the harness makes few)."""

    def __init__(self, server: str, context: ssl.SSLContext, timeout: float = 10.0) -> None:
        parts = urlsplit(server)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 443
        self._context = context
        self._timeout = timeout

    def request_raw(self, method: str, path: str, body: bytes | None = None,
                    content_type: str = "application/json") -> tuple[int, str]:
        conn = http.client.HTTPSConnection(self._host, self._port, context=self._context, timeout=self._timeout)
        try:
            headers = {"Accept": "application/json"}
            if body is not None:
                headers["Content-Type"] = content_type
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read().decode(errors="replace")
        finally:
            conn.close()

    def request(self, method: str, path: str, obj: object | None = None,
                content_type: str = "application/json") -> JSON:
        body = None if obj is None else json.dumps(obj).encode()
        status, text = self.request_raw(method, path, body, content_type)
        if not 200 <= status < 300:
            raise ApiError(method, path, status, text)
        result: JSON = json.loads(text) if text else {}
        return result

    def get(self, path: str) -> JSON:
        return self.request("GET", path)

    def create(self, path: str, obj: JSON) -> JSON:
        return self.request("POST", path, obj)

    def merge_patch(self, path: str, patch: JSON) -> JSON:
        return self.request("PATCH", path, patch, "application/merge-patch+json")

    def delete(self, path: str) -> JSON:
        return self.request("DELETE", path)

    def apply(self, collection: str, obj: JSON) -> JSON:
        """Create `obj` in `collection`, or replace the existing object of that name."""
        try:
            return self.create(collection, obj)
        except ApiError as err:
            if err.status != 409:
                raise
        path = f"{collection}/{obj['metadata']['name']}"
        current = self.get(path)
        replacement = {**obj, "metadata": {**obj["metadata"],
                                           "resourceVersion": current["metadata"]["resourceVersion"]}}
        return self.request("PUT", path, replacement)


def condition(obj: JSON, kind: str) -> str | None:
    """The status ("True"/"False"/"Unknown") of condition `kind` in `obj.status.conditions`, if present."""
    for cond in obj.get("status", {}).get("conditions") or []:
        if cond.get("type") == kind:
            return str(cond.get("status"))
    return None
