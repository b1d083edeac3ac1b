"""Fuzz the webhook's HTTP application (pytest-aiohttp's test server) with generated and mutated
AdmissionReviews, arbitrary JSON and raw bytes, on both admission paths.

Properties: never a 5xx; a well-formed review gets its own uid back; a denial of an MPIJob is a 422
Status whose every cause names a field; a patch only adds, applies, and re-mutating its result asks for
nothing more. Hypothesis runs in a worker thread and sends each request through the test client on the
event loop.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from typing import Any

import jsonpatch
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.figures import BUDGETS, Counter, fuzz_settings, measured
from tests.fuzz.strategies import MPIJOB_KIND, MPIJOB_V2_KIND, json_values, mutated, reviews
from tests.webhook.conftest import Client
from webhook import admission
from webhook.app import MUTATE_PATH, VALIDATE_PATH

PATHS = [MUTATE_PATH, VALIDATE_PATH]
ANNOTATION_POINTER = "/metadata/annotations/mpijobs.kubeflow.org~1v2-spec"


def _request(body: bytes) -> Any:
    try:
        return orjson.loads(body)["request"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None


def check_response(path: str, body: bytes, status: int, raw: bytes, counter: Counter) -> None:
    """The contract of one answer; raises AssertionError with the evidence."""
    assert status < 500, (status, raw[:2000])
    answer = orjson.loads(raw)
    if status != 200:
        assert status in (400, 413), status
        assert answer["kind"] == "Status"
        assert answer["message"]
        counter.count(f"http_{status}")
        return
    request = _request(body)
    response = answer["response"]
    assert response["uid"] == request["uid"]
    assert isinstance(response["allowed"], bool)
    if response["allowed"]:
        counter.count("allowed")
        if "patch" in response:
            check_patch(request, response)
        return
    reason = response["status"]["reason"]
    if reason == "BadRequest":  # a review of another resource: the webhook rules are wrong, not a field
        assert request.get("kind") not in (MPIJOB_KIND, MPIJOB_V2_KIND)
        counter.count("denied_other_kind")
        return
    assert path == VALIDATE_PATH
    status_body = response["status"]
    assert (status_body["code"], reason) == (422, "Invalid")
    causes = status_body["details"]["causes"]
    assert causes
    for cause in causes:
        assert isinstance(cause["field"], str)
        assert cause["field"]
    for cause in causes[:20]:  # (all of them would be quadratic for the bodies with 100k errors)
        assert cause["field"] in status_body["message"]
    counter.count("denied")


def check_patch(request: dict[str, Any], response: dict[str, Any]) -> None:
    assert response["patchType"] == "JSONPatch"
    ops = orjson.loads(base64.b64decode(response["patch"]))
    assert ops
    # only adds, and the one replace that makes a v2beta1 object's failurePolicy annotation canonical
    assert all(op["op"] == "add" or (op["op"], op["path"]) == ("replace", ANNOTATION_POINTER) for op in ops)
    patched = jsonpatch.apply_patch(request["object"], ops, in_place=True)  # a copy deep objects cannot afford
    again = admission.mutate({**request, "object": patched})
    assert "patch" not in again.response, "defaulting is not idempotent"


BODIES = st.one_of(
    reviews().map(orjson.dumps),
    reviews().map(orjson.dumps),
    reviews().map(orjson.dumps),
    reviews().map(orjson.dumps),
    json_values(8).map(orjson.dumps),
    st.binary(max_size=200),
    reviews().map(orjson.dumps).flatmap(lambda b: st.integers(0, len(b)).map(lambda n: b[:n])),  # truncated
    reviews().flatmap(lambda r: mutated(r, max_mutations=3)).map(orjson.dumps),
)


Poster = Callable[[str, bytes], tuple[int, bytes]]


def poster(client: Client, loop: asyncio.AbstractEventLoop) -> Poster:
    """A blocking POST for the hypothesis thread, executed by the test client on the test's event loop."""

    async def post(path: str, body: bytes) -> tuple[int, bytes]:
        resp = await client.post(path, data=body, headers={"Content-Type": "application/json"})
        return resp.status, await resp.read()

    def blocking(path: str, body: bytes) -> tuple[int, bytes]:
        return asyncio.run_coroutine_threadsafe(post(path, body), loop).result(timeout=120)

    return blocking


@pytest.mark.parametrize("examples", BUDGETS)
async def test_webhook_http_never_fails(client: Client, examples: int) -> None:
    post = poster(client, asyncio.get_running_loop())
    with measured("webhook over HTTP: generated and mutated AdmissionReviews, JSON, bytes") as counter:

        @fuzz_settings(examples)
        @given(path=st.sampled_from(PATHS), body=BODIES)
        def run(path: str, body: bytes) -> None:
            counter.examples += 1
            status, raw = post(path, body)
            check_response(path, body, status, raw, counter)

        await asyncio.to_thread(run)
    assert counter.examples >= examples
