"""Fuzz ``POST /convert`` over HTTP with generated and mutated ConversionReviews (MPIJobs of both versions, the
v2-spec annotation in every form), arbitrary JSON and raw bytes.

Properties: never a 5xx; 400 and 413 carry a Failed result; a well-formed review gets its uid back and either
every object, in order, as the desired version with metadata unchanged but for the two annotations, or a Failed
result naming the object (docs/proposals/v2.md, "The webhook contract").
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.api import constants as c
from shared.api.worker_backend import WORKER_BACKEND_ANNOTATION
from tests.fuzz.figures import BUDGETS, Counter, fuzz_settings, measured
from tests.fuzz.strategies import json_values, mutated
from tests.fuzz.test_webhook_fuzz import poster
from tests.unit.v2_strategies import v2_jobs, v2beta1_jobs
from tests.webhook.conftest import Client
from webhook.app import CONVERT_PATH

OBJECTS = st.one_of(v2beta1_jobs(), v2_jobs(), v2beta1_jobs().flatmap(lambda j: mutated(j, max_mutations=2)),
                    json_values(4))
DESIRED = st.sampled_from([c.API_VERSION, c.API_VERSION_V2, c.API_VERSION, c.API_VERSION_V2, "kubeflow.org/v1", ""])


@st.composite
def conversion_reviews(draw: st.DrawFn) -> dict[str, Any]:
    request = {"uid": str(draw(st.uuids())), "desiredAPIVersion": draw(DESIRED),
               "objects": draw(st.lists(OBJECTS, max_size=4))}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": request}


BODIES = st.one_of(
    conversion_reviews().map(orjson.dumps),
    conversion_reviews().map(orjson.dumps),
    conversion_reviews().map(orjson.dumps),
    conversion_reviews().flatmap(lambda r: mutated(r, max_mutations=2)).map(orjson.dumps),
    json_values(8).map(orjson.dumps),
    st.binary(max_size=200),
)


def _metadata_but_the_annotation(obj: Any) -> Any:
    metadata = dict(obj.get("metadata") or {})
    annotations = metadata.pop("annotations", None) or {}
    if isinstance(annotations, dict):  # (a same-version conversion returns any other value as it is)
        annotations = {k: v for k, v in annotations.items()
                       if k not in (c.V2_SPEC_ANNOTATION, WORKER_BACKEND_ANNOTATION)}
    return {**metadata, "annotations": annotations}


def check_answer(body: bytes, status: int, raw: bytes, counter: Counter) -> None:
    assert status < 500, (status, raw[:2000])
    response = orjson.loads(raw)["response"]
    if status != 200:
        assert status in (400, 413), status
        assert response["result"]["status"] == "Failed"
        counter.count(f"http_{status}")
        return
    request = orjson.loads(body)["request"]
    assert response["uid"] == request["uid"]
    if response["result"]["status"] == "Failed":
        assert response["result"]["message"].startswith("objects[")
        assert "convertedObjects" not in response
        counter.count("failed")
        return
    assert response["result"] == {"status": "Success"}
    converted = response["convertedObjects"]
    assert len(converted) == len(request["objects"])
    for before, after in zip(request["objects"], converted, strict=True):
        assert after["apiVersion"] == request["desiredAPIVersion"]
        assert after["kind"] == before["kind"]
        assert _metadata_but_the_annotation(after) == _metadata_but_the_annotation(before)
    counter.count("converted")


@pytest.mark.parametrize("examples", BUDGETS)
async def test_convert_never_fails(client: Client, examples: int) -> None:
    post = poster(client, asyncio.get_running_loop())
    with measured("POST /convert: generated and mutated ConversionReviews, JSON, bytes") as counter:

        @fuzz_settings(examples)
        @given(body=BODIES)
        def run(body: bytes) -> None:
            counter.examples += 1
            status, raw = post(CONVERT_PATH, body)
            check_answer(body, status, raw, counter)

        await asyncio.to_thread(run)
    assert counter.examples >= examples
