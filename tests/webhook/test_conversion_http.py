"""ConversionReview round trips through the real aiohttp application (POST /convert), and admission of
kubeflow.org/v2 objects (docs/proposals/v2.md, "The webhook contract")."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from aiohttp import web
from prometheus_client import generate_latest

from shared.api import constants as c
from tests.webhook.conftest import Client, decode_patch, review
from tests.webhook.test_admission_http import big_job, minimal, post
from webhook import handlers
from webhook.app import CONVERT_PATH, MUTATE_PATH, VALIDATE_PATH, create_app
from webhook.metrics import WebhookMetrics
from webhook.state import METRICS

UID = "7d0c2a51-3e4b-4b8e-8a53-2f4c7d9f0002"
ANNOTATION = c.V2_SPEC_ANNOTATION
POLICY = {"maxRestarts": 2, "rules": [{"name": "disrupted", "action": "RestartJob",
                                       "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
STORED = '{"spec":{"runPolicy":{"failurePolicy":' + orjson.dumps(POLICY, option=orjson.OPT_SORT_KEYS).decode() + "}}}"
REVIEW = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}


def v2_job(name: str = "pi") -> dict[str, Any]:
    job = minimal(name)
    job["apiVersion"] = c.API_VERSION_V2
    job["metadata"].update(uid="u-1", resourceVersion="3", labels={"team": "a"})
    job["spec"]["runPolicy"] = {"cleanPodPolicy": "Running", "failurePolicy": copy.deepcopy(POLICY)}
    return job


def stored_job(name: str = "pi") -> dict[str, Any]:
    job = v2_job(name)
    job["apiVersion"] = c.API_VERSION
    job["metadata"]["annotations"] = {ANNOTATION: STORED}
    job["spec"]["runPolicy"] = {"cleanPodPolicy": "Running"}
    return job


def conversion_review(desired: str, objects: list[Any], uid: str = UID) -> dict[str, Any]:
    return {**REVIEW, "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects}}


def converted(objects: list[Any], uid: str = UID) -> dict[str, Any]:
    return {**REVIEW, "response": {"uid": uid, "convertedObjects": objects, "result": {"status": "Success"}}}


def failed(message: str, uid: str = UID) -> dict[str, Any]:
    return {**REVIEW, "response": {"uid": uid, "result": {"status": "Failed", "message": message}}}


async def test_v2_to_v2beta1_and_back_in_request_order(client: Client) -> None:
    plain = {**minimal("plain"), "apiVersion": c.API_VERSION_V2}
    status, body = await post(client, CONVERT_PATH, conversion_review(c.API_VERSION, [v2_job("a"), plain, v2_job()]))
    assert (status, body) == (200, converted([stored_job("a"), {**plain, "apiVersion": c.API_VERSION}, stored_job()]))
    status, body = await post(client, CONVERT_PATH, conversion_review(c.API_VERSION_V2, body["response"][
        "convertedObjects"]))
    assert (status, body) == (200, converted([v2_job("a"), plain, v2_job()]))


async def test_an_empty_list_and_the_same_version(client: Client) -> None:
    assert await post(client, CONVERT_PATH, conversion_review(c.API_VERSION, [])) == (200, converted([]))
    assert await post(client, CONVERT_PATH, conversion_review(c.API_VERSION, [stored_job()])) == (
        200, converted([stored_job()]))


OBJECT_FAILURES = [
    pytest.param(c.API_VERSION_V2, [stored_job(), "x"], "objects[1]: not an object", id="not an object"),
    pytest.param(c.API_VERSION_V2, [{"apiVersion": "v1", "kind": "Pod"}],
                 "objects[0]: kind 'Pod' is not MPIJob", id="another kind"),
    pytest.param(c.API_VERSION_V2, [{**stored_job(), "apiVersion": "kubeflow.org/v1"}],
                 "objects[0]: unsupported apiVersion 'kubeflow.org/v1': supported are kubeflow.org/v2beta1, "
                 "kubeflow.org/v2", id="unknown apiVersion"),
    pytest.param(c.API_VERSION_V2, [{**stored_job(), "apiVersion": "x" * 5000}],
                 "objects[0]: unsupported apiVersion a string of 5000 characters: supported are kubeflow.org/v2beta1, "
                 "kubeflow.org/v2", id="huge apiVersion not echoed"),
    pytest.param("kubeflow.org/v1", [stored_job()], "objects[0]: unsupported desiredAPIVersion 'kubeflow.org/v1': "
                 "supported are kubeflow.org/v2beta1, kubeflow.org/v2", id="unknown desiredAPIVersion"),
    pytest.param(c.API_VERSION, [{**v2_job(), "metadata": {"name": "pi", "annotations": ["x"]}}],
                 "objects[0]: metadata.annotations is not an object", id="annotations not an object"),
]


@pytest.mark.parametrize(("desired", "objects", "message"), OBJECT_FAILURES)
async def test_an_object_that_cannot_be_converted_fails_the_review(client: Client, desired: str,
                                                                    objects: list[Any], message: str) -> None:
    assert await post(client, CONVERT_PATH, conversion_review(desired, objects)) == (200, failed(message))


BAD_REVIEWS = [
    pytest.param(b"{", "request body is not valid JSON (error at line 1 column 2)", id="not JSON"),
    pytest.param(b"", "request body is not valid JSON (error at line 1 column 1)", id="empty"),
    pytest.param(b"[]", "request body must be a JSON object (a ConversionReview)", id="array"),
    pytest.param(orjson.dumps({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview"}),
                 "expected apiVersion apiextensions.k8s.io/v1 kind ConversionReview, got apiVersion "
                 "'apiextensions.k8s.io/v1beta1' kind 'ConversionReview'", id="v1beta1"),
    pytest.param(orjson.dumps(REVIEW), "ConversionReview.request must be an object", id="no request"),
    pytest.param(orjson.dumps(conversion_review(c.API_VERSION, [], uid="")),
                 "ConversionReview.request.uid must be a non-empty string", id="no uid"),
    pytest.param(orjson.dumps({**REVIEW, "request": {"uid": UID, "objects": []}}),
                 "ConversionReview.request.desiredAPIVersion must be a string", id="no desiredAPIVersion"),
    pytest.param(orjson.dumps({**REVIEW, "request": {"uid": UID, "desiredAPIVersion": c.API_VERSION,
                                                     "objects": {}}}),
                 "ConversionReview.request.objects must be an array", id="objects not an array"),
]


@pytest.mark.parametrize(("body", "message"), BAD_REVIEWS)
async def test_a_malformed_review_gets_400(client: Client, body: bytes, message: str) -> None:
    assert await post(client, CONVERT_PATH, body) == (400, failed(message, uid=""))


def page_of_jobs(count: int, size: int) -> list[dict[str, Any]]:
    """``count`` stored jobs of about ``size`` bytes each (a long annotation), as a LIST page brings them."""
    jobs = []
    for index in range(count):
        job = stored_job(f"job-{index}")
        job["metadata"]["annotations"]["note"] = "x" * size
        jobs.append(job)
    return jobs


async def test_a_list_page_of_500_large_jobs_converts(client: Client) -> None:
    """kubectl lists 500 per page, and the API server converts a page in one review: 10 MB of 20 KB MPIJobs,
    more than the admission limit (8 MiB), within the conversion limits (32 MiB and its parse cost by default)."""
    page = page_of_jobs(500, 20 * 1024)
    body = orjson.dumps(conversion_review(c.API_VERSION_V2, page))
    assert len(body) > 10 * 1000 * 1000
    status, answer = await post(client, CONVERT_PATH, body)
    assert status == 200
    assert answer["response"]["result"] == {"status": "Success"}
    assert [o["metadata"]["name"] for o in answer["response"]["convertedObjects"]] == [
        f"job-{index}" for index in range(500)]
    assert answer["response"]["convertedObjects"][0]["spec"]["runPolicy"]["failurePolicy"] == POLICY


async def test_a_body_over_the_conversion_limit_gets_413(aiohttp_client: Any) -> None:
    client = await aiohttp_client(create_app(max_body_bytes=8 * 1024 * 1024, max_conversion_body_bytes=1024 * 1024))
    big = orjson.dumps(conversion_review(c.API_VERSION, page_of_jobs(1, 2 * 1024 * 1024)))
    status, body = await post(client, CONVERT_PATH, big)
    assert status == 413
    assert body["response"]["result"]["status"] == "Failed"
    too_large = web.HTTPRequestEntityTooLarge(max_size=1024 * 1024, actual_size=len(big)).text
    assert body["response"]["result"]["message"] == f"request body too large for the MPIJob webhook: {too_large}"


async def test_the_conversion_limit_does_not_raise_the_admission_limit(client: Client) -> None:
    """Each route reads against its own limit: admission refuses a review over its 8 MiB."""
    body = orjson.dumps(review(big_job(9 * 1024 * 1024)))
    status, answer = await post(client, VALIDATE_PATH, body)
    assert status == 413
    too_large = web.HTTPRequestEntityTooLarge(max_size=8 * 1024 * 1024, actual_size=len(body)).text
    assert answer["message"] == f"request body too large for the MPIJob webhook: {too_large}"


async def test_an_unexpected_error_is_a_failed_result_not_a_5xx(aiohttp_client: Any) -> None:
    def broken(request: dict[str, Any]) -> tuple[dict[str, Any], int]:
        raise RecursionError("boom")

    app = web.Application()
    app[METRICS] = WebhookMetrics()
    app.router.add_post("/convert", handlers.conversion_handler(broken))
    client = await aiohttp_client(app)
    assert await post(client, "/convert", conversion_review(c.API_VERSION, [v2_job()])) == (200, failed(
        f"internal error in the MPIJob webhook while converting request {UID}; see the webhook's log"))
    scrape = generate_latest(app[METRICS].registry).decode().splitlines()
    assert "mpijob_webhook_conversion_failures_total 1.0" in scrape
    assert 'mpijob_webhook_requests_total{operation="convert",result="error"} 1.0' in scrape


def v2_review(obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None) -> dict[str, Any]:
    version = {"group": "kubeflow.org", "version": "v2", "kind": "MPIJob"}
    resource = {"group": "kubeflow.org", "version": "v2", "resource": "mpijobs"}
    return review(obj, operation, old, kind=version, requestKind=version, resource=resource,
                  requestResource=resource)


async def test_v2_is_defaulted_and_allowed(client: Client) -> None:
    status, body = await post(client, MUTATE_PATH, v2_review(v2_job()))
    assert status == 200
    assert decode_patch(body["response"])[0] == {"op": "add", "path": "/spec/slotsPerWorker", "value": 1}
    assert await post(client, VALIDATE_PATH, v2_review(v2_job())) == (200, {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": "0d5c4e1a-7b2f-4f55-9a53-1f4c7d9f0001", "allowed": True}})


async def _denial(client: Client, body: dict[str, Any]) -> list[str]:
    status, answer = await post(client, VALIDATE_PATH, body)
    assert status == 200
    assert answer["response"]["allowed"] is False
    return [cause["field"] + ": " + cause["message"] for cause in answer["response"]["status"]["details"]["causes"]]


async def test_v2_denials(client: Client) -> None:
    job = v2_job()
    job["spec"]["runPolicy"]["failurePolicy"]["rules"][0]["action"] = "Restart"
    job["metadata"]["annotations"] = {ANNOTATION: STORED}
    assert await _denial(client, v2_review(job)) == [
        f"metadata.annotations[{ANNOTATION}]: Forbidden: is reserved for storing v2 fields in kubeflow.org/v2beta1; "
        "set spec.runPolicy.failurePolicy instead",
        'spec.runPolicy.failurePolicy.rules[0].action: Unsupported value: "Restart": supported values: "RestartJob", '
        '"FailJob"']
    changed = v2_job()
    changed["spec"]["runPolicy"]["failurePolicy"]["maxRestarts"] = 3
    assert await _denial(client, v2_review(changed, "UPDATE", v2_job())) == [
        'spec.runPolicy.failurePolicy: Invalid value: {"maxRestarts":3,"rules":[{"name":"disrupted","action":'
        '"RestartJob","onPodConditions":[{"type":"DisruptionTarget","status":"True"}]}]}: field is immutable']


async def test_v2beta1_annotation_is_validated_made_canonical_and_immutable(client: Client) -> None:
    job = stored_job()
    job["metadata"]["annotations"][ANNOTATION] = orjson.dumps(orjson.loads(STORED), option=orjson.OPT_INDENT_2).decode()
    status, body = await post(client, MUTATE_PATH, review(job))
    assert status == 200
    assert decode_patch(body["response"])[-1] == {
        "op": "replace", "path": "/metadata/annotations/mpijobs.kubeflow.org~1v2-spec", "value": STORED}
    changed = stored_job()
    changed["metadata"]["annotations"][ANNOTATION] = STORED.replace('"maxRestarts":2', '"maxRestarts":3')
    assert await _denial(client, review(changed, "UPDATE", stored_job())) == [
        f'metadata.annotations[{ANNOTATION}]: Invalid value: "<{len(STORED)} characters>": is immutable: it holds '
        "spec.runPolicy.failurePolicy of kubeflow.org/v2"]
    invalid = stored_job()
    invalid["metadata"]["annotations"][ANNOTATION] = STORED.replace("RestartJob", "Restart")
    assert await _denial(client, review(invalid)) == [
        f'metadata.annotations[{ANNOTATION}].spec.runPolicy.failurePolicy.rules[0].action: Unsupported value: '
        '"Restart": supported values: "RestartJob", "FailJob"']
