"""Fixtures for webhook HTTP tests: the real application on pytest-aiohttp's test server."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from webhook.app import create_app

Client = TestClient[web.Request, web.Application]


@pytest.fixture
async def client(aiohttp_client: Callable[..., Awaitable[Client]]) -> Client:
    return await aiohttp_client(create_app(max_body_bytes=8 * 1024 * 1024))


def review(obj: dict[str, Any] | None, operation: str = "CREATE", old: dict[str, Any] | None = None,
           uid: str = "0d5c4e1a-7b2f-4f55-9a53-1f4c7d9f0001", **request: Any) -> dict[str, Any]:
    """An AdmissionReview as the API server sends it for an MPIJob."""
    body: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": "kubeflow.org", "version": "v2beta1", "kind": "MPIJob"},
        "resource": {"group": "kubeflow.org", "version": "v2beta1", "resource": "mpijobs"},
        "requestKind": {"group": "kubeflow.org", "version": "v2beta1", "kind": "MPIJob"},
        "requestResource": {"group": "kubeflow.org", "version": "v2beta1", "resource": "mpijobs"},
        "name": (obj or {}).get("metadata", {}).get("name", ""),
        "namespace": "default",
        "operation": operation,
        "userInfo": {"username": "admin", "groups": ["system:masters"]},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        **request,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}


def decode_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert response["patchType"] == "JSONPatch"
    patch: list[dict[str, Any]] = orjson.loads(base64.b64decode(response["patch"]))
    return patch
