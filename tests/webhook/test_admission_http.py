"""AdmissionReview round trips through the real aiohttp application."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import pytest
from aiohttp import web

from tests.reference import example_params, load_example
from tests.webhook.conftest import Client, decode_patch, review
from webhook import handlers
from webhook.app import MUTATE_PATH, VALIDATE_PATH, create_app
from webhook.metrics import WebhookMetrics
from webhook.state import METRICS

UID = "0d5c4e1a-7b2f-4f55-9a53-1f4c7d9f0001"
CONTAINER = {"name": "main", "image": "mpi-pi"}


def template(**pod_spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [dict(CONTAINER)], **pod_spec}}


def mpijob(name: str = "pi", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def minimal(name: str = "pi") -> dict[str, Any]:
    return mpijob(name, mpiReplicaSpecs={"Launcher": {"template": template()},
                                         "Worker": {"replicas": 2, "template": template()}})


async def post(client: Client, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    resp = await client.post(path, data=data, headers={"Content-Type": "application/json"})
    assert resp.headers["Content-Type"] == "application/json", "every answer, allowed or not, is JSON"
    return resp.status, orjson.loads(await resp.read())


async def test_mutate_adds_only_unset_defaults(client: Client) -> None:
    status, body = await post(client, MUTATE_PATH, review(minimal()))
    assert status == 200
    response = body["response"]
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    assert decode_patch(response) == [
        {"op": "add", "path": "/spec/slotsPerWorker", "value": 1},
        {"op": "add", "path": "/spec/runLauncherAsWorker", "value": False},
        {"op": "add", "path": "/spec/sshAuthMountPath", "value": "/root/.ssh"},
        {"op": "add", "path": "/spec/launcherCreationPolicy", "value": "AtStartup"},
        {"op": "add", "path": "/spec/mpiImplementation", "value": "OpenMPI"},
        {"op": "add", "path": "/spec/runPolicy", "value": {"cleanPodPolicy": "None"}},
        {"op": "add", "path": "/spec/mpiReplicaSpecs/Launcher/replicas", "value": 1},
        {"op": "add", "path": "/spec/mpiReplicaSpecs/Launcher/restartPolicy", "value": "OnFailure"},
        {"op": "add", "path": "/spec/mpiReplicaSpecs/Worker/restartPolicy", "value": "Never"},
    ]
    assert {k: v for k, v in response.items() if k != "patch"} == {
        "uid": UID, "allowed": True, "patchType": "JSONPatch"}


async def test_mutate_without_changes_is_a_plain_allow(client: Client) -> None:
    job = mpijob(slotsPerWorker=1, runLauncherAsWorker=False, sshAuthMountPath="/root/.ssh",
                 launcherCreationPolicy="AtStartup", mpiImplementation="OpenMPI",
                 runPolicy={"cleanPodPolicy": "Running", "suspend": True},
                 mpiReplicaSpecs={"Launcher": {"replicas": 1, "restartPolicy": "OnFailure", "template": template()}})
    status, body = await post(client, MUTATE_PATH, review(job, dryRun=True))
    assert (status, body["response"]) == (200, {"uid": UID, "allowed": True})


async def test_validate_allows_a_valid_job(client: Client) -> None:
    status, body = await post(client, VALIDATE_PATH, review(minimal()))
    assert (status, body) == (200, {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                    "response": {"uid": UID, "allowed": True}})


async def test_validate_denies_with_field_errors(client: Client) -> None:
    job = mpijob("pi", slotsPerWorker=-1, mpiImplementation="OpenMPI",
                 mpiReplicaSpecs={"Launcher": {"replicas": 2, "template": {"spec": {"containers": []}}},
                                  "worker": {"replicas": 1, "template": template()}})
    status, body = await post(client, VALIDATE_PATH, review(job))
    assert status == 200
    assert body["response"] == {
        "uid": UID,
        "allowed": False,
        "status": {
            "apiVersion": "v1", "kind": "Status", "status": "Failure", "reason": "Invalid", "code": 422,
            "message": 'MPIJob.kubeflow.org "pi" is invalid: ['
            "spec.mpiReplicaSpecs[Launcher].template.spec.containers: Required value: must define at least one "
            "container, spec.mpiReplicaSpecs[Launcher].replicas: Invalid value: 2: must be 1, "
            "spec.slotsPerWorker: Invalid value: -1: must be greater than or equal to 0, "
            'spec.mpiReplicaSpecs[worker]: Unsupported value: "worker": supported values: "Launcher", "Worker"; '
            'did you mean "Worker"? (replica types are case-sensitive)]',
            "details": {"name": "pi", "group": "kubeflow.org", "kind": "MPIJob", "causes": [
                {"reason": "FieldValueRequired", "field": "spec.mpiReplicaSpecs[Launcher].template.spec.containers",
                 "message": "Required value: must define at least one container"},
                {"reason": "FieldValueInvalid", "field": "spec.mpiReplicaSpecs[Launcher].replicas",
                 "message": "Invalid value: 2: must be 1"},
                {"reason": "FieldValueInvalid", "field": "spec.slotsPerWorker",
                 "message": "Invalid value: -1: must be greater than or equal to 0"},
                {"reason": "FieldValueNotSupported", "field": "spec.mpiReplicaSpecs[worker]",
                 "message": 'Unsupported value: "worker": supported values: "Launcher", "Worker"; did you mean '
                 '"Worker"? (replica types are case-sensitive)'},
            ]},
        },
    }


async def test_validate_reports_wrong_types_as_field_errors(client: Client) -> None:
    job = minimal()
    job["spec"]["slotsPerWorker"] = "two"
    status, body = await post(client, VALIDATE_PATH, review(job))
    assert status == 200
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["details"]["causes"] == [
        {"reason": "FieldValueTypeInvalid", "field": "spec.slotsPerWorker",
         "message": 'Invalid value: "two": must be of type integer'}]


async def test_warnings_for_likely_mistakes(client: Client) -> None:
    gpu_worker = template(securityContext={"runAsUser": 1000})
    gpu_worker["spec"]["containers"] = [{**CONTAINER, "resources": {"limits": {"nvidia.com/gpu": "4"}}}]
    job = mpijob("pi", slotsPerWorker=1, mpiReplicaSpecs={
        "Launcher": {"template": template(securityContext={"runAsUser": 1000})},
        "Worker": {"replicas": 2, "template": gpu_worker}})
    status, body = await post(client, VALIDATE_PATH, review(job))
    assert status == 200
    assert body["response"] == {"uid": UID, "allowed": True, "warnings": [
        "spec.sshAuthMountPath: /root/.ssh is under /root but the Launcher pods run as a non-root user, who cannot "
        "read it: set sshAuthMountPath to that user's ~/.ssh",
        "spec.sshAuthMountPath: /root/.ssh is under /root but the Worker pods run as a non-root user, who cannot "
        "read it: set sshAuthMountPath to that user's ~/.ssh",
        "spec.slotsPerWorker: 1 slot(s) per worker but each worker requests 4 GPU(s): set slotsPerWorker to 4 to "
        "run one process per GPU",
    ]}


async def test_update_denies_a_managed_by_change(client: Client) -> None:
    old = minimal()
    new = minimal()
    new["spec"]["runPolicy"] = {"managedBy": "kueue.x-k8s.io/multikueue"}
    status, body = await post(client, VALIDATE_PATH, review(new, "UPDATE", old))
    assert status == 200
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["message"] == (
        'MPIJob.kubeflow.org "pi" is invalid: spec.runPolicy.managedBy: Invalid value: '
        '"kueue.x-k8s.io/multikueue": field is immutable')


async def test_update_denies_only_new_problems(client: Client) -> None:
    """An object stored invalid before the webhook existed can still get labels or be suspended."""
    old = minimal()
    old["spec"]["slotsPerWorker"] = -1
    new = orjson.loads(orjson.dumps(old))
    new["metadata"]["labels"] = {"team": "a"}
    new["spec"]["runPolicy"] = {"suspend": True}
    status, body = await post(client, VALIDATE_PATH, review(new, "UPDATE", old))
    assert (status, body["response"]) == (200, {"uid": UID, "allowed": True})
    new["spec"]["mpiImplementation"] = "Nope"
    status, body = await post(client, VALIDATE_PATH, review(new, "UPDATE", old))
    assert [c["field"] for c in body["response"]["status"]["details"]["causes"]] == ["spec.mpiImplementation"]


async def test_update_of_a_deleting_object_is_allowed(client: Client) -> None:
    old = minimal()
    new = minimal()
    new["metadata"]["deletionTimestamp"] = "2026-11-29T00:00:00Z"
    new["spec"]["slotsPerWorker"] = -5
    status, body = await post(client, VALIDATE_PATH, review(new, "UPDATE", old))
    assert (status, body["response"]) == (200, {"uid": UID, "allowed": True})


@pytest.mark.parametrize("path", [MUTATE_PATH, VALIDATE_PATH])
@pytest.mark.parametrize("operation", ["DELETE", "CONNECT"])
async def test_delete_and_connect_are_allowed(client: Client, path: str, operation: str) -> None:
    status, body = await post(client, path, review(None, operation, old=minimal()))
    assert (status, body["response"]) == (200, {"uid": UID, "allowed": True})


async def test_dry_run_is_judged_the_same(client: Client) -> None:
    job = minimal("1-pi")
    _, wet = await post(client, VALIDATE_PATH, review(job))
    _, dry = await post(client, VALIDATE_PATH, review(job, dryRun=True))
    assert wet == dry
    assert wet["response"]["allowed"] is False


async def test_a_review_of_another_kind_is_refused(client: Client) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    body_in = review(pod, kind={"group": "", "version": "v1", "kind": "Pod"})
    for path in (MUTATE_PATH, VALIDATE_PATH):
        status, body = await post(client, path, body_in)
        assert status == 200
        assert body["response"] == {"uid": UID, "allowed": False, "status": {
            "status": "Failure", "reason": "BadRequest", "code": 400,
            "message": "this webhook admits only kubeflow.org/v2beta1 and kubeflow.org/v2, Kind=MPIJob; got /v1, "
            "Kind=Pod: check the webhook rules"}}


BAD_BODIES = [
    pytest.param(b"{not json", "request body is not valid JSON (error at line 1 column 2)",
                 id="not JSON"),
    pytest.param(b"[]", "request body must be a JSON object (an AdmissionReview)", id="JSON array"),
    pytest.param(orjson.dumps({"apiVersion": "v1", "kind": "Pod"}),
                 "expected apiVersion admission.k8s.io/v1 kind AdmissionReview, got apiVersion 'v1' kind 'Pod'",
                 id="another kind"),
    pytest.param(orjson.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}),
                 "expected apiVersion admission.k8s.io/v1 kind AdmissionReview, got apiVersion "
                 "'admission.k8s.io/v1beta1' kind 'AdmissionReview'", id="v1beta1 review"),
    pytest.param(orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
                 "AdmissionReview.request must be an object", id="no request"),
    pytest.param(orjson.dumps(review(minimal(), uid="")), "AdmissionReview.request.uid must be a non-empty string",
                 id="no uid"),
    pytest.param(orjson.dumps(review(None)), "AdmissionReview.request.object must be an object for CREATE",
                 id="CREATE without object"),
    pytest.param(orjson.dumps(review(minimal(), "UPDATE")),
                 "AdmissionReview.request.oldObject must be an object for UPDATE", id="UPDATE without oldObject"),
    pytest.param(b"", "request body is not valid JSON (error at line 1 column 1)", id="empty body"),
]


@pytest.mark.parametrize("path", [MUTATE_PATH, VALIDATE_PATH])
@pytest.mark.parametrize(("body", "message"), BAD_BODIES)
async def test_malformed_requests_get_400(client: Client, path: str, body: bytes, message: str) -> None:
    status, answer = await post(client, path, body)
    assert (status, answer) == (400, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                      "message": message, "reason": "BadRequest", "code": 400})


def big_job(target_bytes: int) -> dict[str, Any]:
    """A valid MPIJob padded with many env vars to reach about ``target_bytes`` of JSON."""
    job = minimal()
    env = [{"name": f"VAR_{i}", "value": "x" * 200} for i in range(target_bytes // 230)]
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"] = env
    return job


async def test_a_7_mib_mpijob_is_admitted(client: Client) -> None:
    body = orjson.dumps(review(big_job(7 * 1024 * 1024)))
    assert len(body) > 7 * 1024 * 1024
    status, answer = await post(client, VALIDATE_PATH, body)
    assert (status, answer["response"]) == (200, {"uid": UID, "allowed": True})


async def test_a_body_over_the_limit_gets_413(client: Client) -> None:
    body = orjson.dumps(review(big_job(9 * 1024 * 1024)))
    status, answer = await post(client, MUTATE_PATH, body)
    assert status == 413
    assert answer["reason"] == "RequestEntityTooLarge"
    assert answer["message"].startswith("request body too large for the MPIJob webhook: Maximum request body size "
                                        "8388608 exceeded")


async def test_an_unexpected_error_gets_500_with_the_uid(aiohttp_client: Any) -> None:
    def broken(request: dict[str, Any]) -> Any:
        raise RuntimeError("boom")

    app = web.Application()
    app[METRICS] = WebhookMetrics()
    app.router.add_post("/broken", handlers.admission_handler("validate", broken))
    client = await aiohttp_client(app)
    status, body = await post(client, "/broken", review(minimal()))
    assert (status, body) == (500, {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
        "uid": UID, "allowed": False, "status": {
            "status": "Failure", "reason": "InternalError", "code": 500,
            "message": f"internal error in the MPIJob webhook while admitting request {UID}; see the webhook's log"}}})


async def test_get_on_an_admission_path_is_405(client: Client) -> None:
    resp = await client.get(VALIDATE_PATH)
    assert resp.status == 405


async def test_health_and_metrics(client: Client) -> None:
    assert (await (await client.get("/healthz")).text()) == "ok"
    assert (await (await client.get("/readyz")).text()) == "ok"
    await post(client, MUTATE_PATH, review(minimal()))
    await post(client, VALIDATE_PATH, review(minimal("1-bad")))
    await post(client, VALIDATE_PATH, b"nope")
    metrics = await (await client.get("/metrics")).text()
    assert 'mpijob_webhook_requests_total{operation="mutate",result="patched"} 1.0' in metrics
    assert 'mpijob_webhook_requests_total{operation="validate",result="denied"} 1.0' in metrics
    assert 'mpijob_webhook_requests_total{operation="validate",result="bad_request"} 1.0' in metrics
    assert 'mpijob_webhook_request_duration_seconds_count{operation="mutate",result="patched"} 1.0' in metrics


async def test_readyz_reports_not_ready(aiohttp_client: Any) -> None:
    client = await aiohttp_client(create_app(ready_check=lambda: False))
    resp = await client.get("/readyz")
    assert resp.status == 503


@pytest.mark.parametrize("path", example_params())
async def test_upstream_examples_are_defaulted_then_allowed(client: Client, path: Path) -> None:
    job = load_example(path)
    job["metadata"].setdefault("namespace", "default")
    status, mutated = await post(client, MUTATE_PATH, review(job))
    assert status == 200
    defaulted = jsonpatch.apply_patch(job, decode_patch(mutated["response"]))
    assert defaulted["spec"]["launcherCreationPolicy"] == "AtStartup"
    assert defaulted["spec"]["mpiImplementation"] in ("OpenMPI", "Intel", "MPICH")
    assert defaulted["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] == "OnFailure"
    assert defaulted["spec"]["mpiReplicaSpecs"]["Worker"]["restartPolicy"] == "Never"
    status, validated = await post(client, VALIDATE_PATH, review(defaulted))
    assert status == 200
    assert validated["response"]["allowed"] is True, validated
