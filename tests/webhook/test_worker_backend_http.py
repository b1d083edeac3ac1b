"""The worker backend over HTTP: MPIJobs naming it through both versions (denials with their field paths, the warning)
and the pod webhook ``POST /mutate--v1-pod`` (the patch, pods allowed unchanged, the log line and the metric)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from shared.api import constants as c
from shared.api.worker_backend import JOB_COMPLETION_INDEX, REPLICA_INDEX_OFFSET_ANNOTATION, WORKER_JOB_LABEL
from tests.webhook.conftest import Client, decode_patch, review
from tests.webhook.test_admission_http import UID, minimal, post
from webhook.app import POD_INDEX_PATH, VALIDATE_PATH

BACKEND = "mpijobs.kubeflow.org/worker-backend"
V2: dict[str, Any] = {"kind": {"group": "kubeflow.org", "version": "v2", "kind": "MPIJob"},
                      "resource": {"group": "kubeflow.org", "version": "v2", "resource": "mpijobs"}}
POD: dict[str, Any] = {"kind": {"group": "", "version": "v1", "kind": "Pod"},
                       "resource": {"group": "", "version": "v1", "resource": "pods"},
                       "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
                       "requestResource": {"group": "", "version": "v1", "resource": "pods"}}
WARNING = ("{path}: with IndexedJob, worker pods are named pi-worker-<index>-<random> (hostnames unchanged): select "
           "one by label, e.g. kubectl logs -l training.kubeflow.org/job-name=pi,"
           "batch.kubernetes.io/job-completion-index=0")


def v2beta1(backend: str | None) -> dict[str, Any]:
    job = minimal()
    if backend is not None:
        job["metadata"]["annotations"] = {BACKEND: backend}
    return job


def v2(backend: str | None) -> dict[str, Any]:
    job = minimal()
    job["apiVersion"] = c.API_VERSION_V2
    if backend is not None:
        job["spec"]["workerBackend"] = backend
    return job


def causes(body: dict[str, Any]) -> list[dict[str, str]]:
    causes_: list[dict[str, str]] = body["response"]["status"]["details"]["causes"]
    return causes_


@pytest.mark.parametrize(("obj", "extra", "path"), [(v2beta1("IndexedJob"), {}, f"metadata.annotations[{BACKEND}]"),
                                                    (v2("IndexedJob"), V2, "spec.workerBackend")],
                         ids=["v2beta1", "v2"])
async def test_an_indexed_job_is_created_with_the_warning(client: Client, obj: dict[str, Any], extra: dict[str, Any],
                                                          path: str) -> None:
    status, body = await post(client, VALIDATE_PATH, review(obj, **extra))
    assert (status, body["response"]) == (200, {"uid": UID, "allowed": True, "warnings": [WARNING.format(path=path)]})
    status, body = await post(client, VALIDATE_PATH, review(obj, "UPDATE", obj, **extra))
    assert (status, body["response"]) == (200, {"uid": UID, "allowed": True}), "said once, when the job is created"


async def test_a_v2beta1_annotation_naming_no_backend_is_denied(client: Client) -> None:
    status, body = await post(client, VALIDATE_PATH, review(v2beta1("indexed")))
    assert status == 200
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["message"] == (
        f'MPIJob.kubeflow.org "pi" is invalid: metadata.annotations[{BACKEND}]: Unsupported value: "indexed": '
        'supported values: "Pods", "IndexedJob"')
    assert causes(body) == [{"reason": "FieldValueNotSupported", "field": f"metadata.annotations[{BACKEND}]",
                             "message": 'Unsupported value: "indexed": supported values: "Pods", "IndexedJob"'}]


@pytest.mark.parametrize(("old", "new"), [(None, "IndexedJob"), ("IndexedJob", None), ("Pods", "IndexedJob")],
                         ids=["added", "removed", "changed"])
async def test_a_v2beta1_update_of_the_backend_is_denied(client: Client, old: str | None, new: str | None) -> None:
    status, body = await post(client, VALIDATE_PATH, review(v2beta1(new), "UPDATE", v2beta1(old)))
    assert status == 200
    assert [(c_["field"], c_["reason"]) for c_ in causes(body)] == [
        (f"metadata.annotations[{BACKEND}]", "FieldValueInvalid")]


async def test_an_indexed_job_worker_template_the_job_api_refuses_is_denied(client: Client) -> None:
    job = v2("IndexedJob")
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["hostname"] = "w"
    status, body = await post(client, VALIDATE_PATH, review(job, **V2))
    assert status == 200
    assert causes(body) == [{"reason": "FieldValueForbidden",
                             "field": "spec.mpiReplicaSpecs[Worker].template.spec.hostname",
                             "message": "Forbidden: must not be set with the IndexedJob worker backend: the Job "
                                        "controller names each worker's host <job>-worker-<index>"}]


# ---- the pod webhook

def worker_pod(labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"generateName": "pi-worker-2-", "namespace": "default",
                                "labels": {WORKER_JOB_LABEL: "pi", **labels}}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"containers": [{"name": "main", "image": "mpi-pi"}]}}


async def scrape(client: Client) -> str:
    return await (await client.get("/metrics")).text()


async def test_a_worker_pod_gets_its_rank_label(client: Client, caplog: pytest.LogCaptureFixture) -> None:
    pod = worker_pod({JOB_COMPLETION_INDEX: "2"}, {REPLICA_INDEX_OFFSET_ANNOTATION: "1"})
    with caplog.at_level(logging.INFO, logger="webhook"):
        status, body = await post(client, POD_INDEX_PATH, review(pod, **POD))
    assert status == 200
    response = body["response"]
    assert {k: v for k, v in response.items() if k != "patch"} == {"uid": UID, "allowed": True,
                                                                  "patchType": "JSONPatch"}
    assert decode_patch(response) == [
        {"op": "add", "path": "/metadata/labels/training.kubeflow.org~1replica-index", "value": "3"}]
    [record] = [r for r in caplog.records if r.getMessage() == "admission"]
    assert {k: v for k, v in record.kv.items() if k != "duration_us"} == {  # type: ignore[attr-defined]
        "op": "mutate_pod", "uid": UID, "operation": "CREATE", "namespace": "default", "name": "", "dry_run": False,
        "patch_ops": 1, "result": "patched"}
    assert 'mpijob_webhook_requests_total{operation="mutate_pod",result="patched"} 1.0' in await scrape(client)


@pytest.mark.parametrize(("labels", "reason"), [({}, "no_index"), ({JOB_COMPLETION_INDEX: "two"}, "malformed_index")])
async def test_a_pod_without_a_valid_index_is_allowed_unchanged(client: Client, caplog: pytest.LogCaptureFixture,
                                                                 labels: dict[str, str], reason: str) -> None:
    with caplog.at_level(logging.INFO, logger="webhook"):
        status, body = await post(client, POD_INDEX_PATH, review(worker_pod(labels), **POD))
    assert (status, body["response"]) == (200, {"uid": UID, "allowed": True})
    [record] = [r for r in caplog.records if r.getMessage() == "admission"]
    assert (record.kv["result"], record.kv["skipped"]) == ("allowed", reason)  # type: ignore[attr-defined]
    text = await scrape(client)
    assert f'mpijob_webhook_replica_index_skipped_total{{reason="{reason}"}} 1.0' in text
    assert 'mpijob_webhook_requests_total{operation="mutate_pod",result="allowed"} 1.0' in text


@pytest.mark.parametrize("body", [b"{", b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}'],
                         ids=["not JSON", "no request"])
async def test_a_malformed_review_is_a_400(client: Client, body: bytes) -> None:
    status, answer = await post(client, POD_INDEX_PATH, body)
    assert (status, answer["kind"], answer["code"], answer["reason"]) == (400, "Status", 400, "BadRequest")
    assert 'mpijob_webhook_requests_total{operation="mutate_pod",result="bad_request"} 1.0' in await scrape(client)
