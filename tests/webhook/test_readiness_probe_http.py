"""The opt-in worker readinessProbe through the real aiohttp application: the annotation's probe is added on
CREATE (never on UPDATE), and the job it makes passes validation without the missing-probe warning."""

from __future__ import annotations

from typing import Any

import jsonpatch

from shared.api.readiness_probe import PROBE_ANNOTATION
from tests.webhook.conftest import Client, decode_patch, review
from tests.webhook.test_admission_http import UID, post, template
from webhook.app import MUTATE_PATH, VALIDATE_PATH

PROBE = {"tcpSocket": {"port": 22}, "periodSeconds": 2}


def waiting_job(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "pi", "namespace": "default"}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": metadata, "spec": {
        "launcherCreationPolicy": "WaitForWorkersReady",
        "mpiReplicaSpecs": {"Launcher": {"template": template()}, "Worker": {"replicas": 2, "template": template()}}}}


async def test_the_annotation_adds_the_probe_on_create(client: Client) -> None:
    job = waiting_job({PROBE_ANNOTATION: "22"})
    status, body = await post(client, MUTATE_PATH, review(job))
    assert status == 200
    mutated = jsonpatch.apply_patch(job, decode_patch(body["response"]))
    assert mutated["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"] == [
        {"name": "main", "image": "mpi-pi", "readinessProbe": PROBE}]
    assert "readinessProbe" not in mutated["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    status, body = await post(client, VALIDATE_PATH, review(mutated))
    assert (status, body["response"]) == (200, {"uid": UID, "allowed": True})


async def test_without_a_probe_validation_warns(client: Client) -> None:
    status, body = await post(client, VALIDATE_PATH, review(waiting_job()))
    assert (status, body["response"]) == (200, {"uid": UID, "allowed": True, "warnings": [
        "spec.mpiReplicaSpecs[Worker].template.spec.containers: no readinessProbe, so a worker is Ready when its "
        "containers start, not when sshd listens, and the launcher may start too early: add a tcpSocket probe on "
        f"sshd's port, or the annotation {PROBE_ANNOTATION}: \"<port>\""]})


async def test_an_update_gets_no_probe(client: Client) -> None:
    old = waiting_job()
    new = waiting_job({PROBE_ANNOTATION: "22"})
    status, body = await post(client, MUTATE_PATH, review(new, "UPDATE", old))
    assert status == 200
    patch = decode_patch(body["response"]) if "patch" in body["response"] else []
    assert [op for op in patch if "readinessProbe" in op["path"]] == []
