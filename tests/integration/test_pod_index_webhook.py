"""The worker backend through the real API server: kubeflow.org/v2's spec.workerBackend stored as v2beta1's annotation,
the annotation validated and immutable, and the pod webhook that gives the IndexedJob backend's worker pods their rank
label (docs/validation.md, "The IndexedJob worker backend"). v2 is on for the module (the fixture api_v2)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import yaml

from hack.devcluster import LocalCluster
from hack.devcluster.operators import OperatorWebhook
from shared.api.worker_backend import JOB_COMPLETION_INDEX, REPLICA_INDEX_OFFSET_ANNOTATION, WORKER_JOB_LABEL
from tests.integration.mpijobs import until

pytestmark = pytest.mark.usefixtures("api_v2")

BACKEND = "mpijobs.kubeflow.org/worker-backend"
RANK = "training.kubeflow.org/replica-index"
CONTAINER = {"name": "main", "image": "mpi-image"}


def job(api_version: str, name: str, backend: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": "MPIJob", "metadata": {"name": name}, "spec": {
        "runPolicy": {"suspend": True},  # nothing to run: only the API matters here
        "mpiReplicaSpecs": {"Launcher": {"template": {"spec": {"containers": [dict(CONTAINER)]}}},
                            "Worker": {"replicas": 2, "template": {"spec": {"containers": [dict(CONTAINER)]}}}}}}
    if backend is not None and api_version == "kubeflow.org/v2":
        obj["spec"]["workerBackend"] = backend
    elif backend is not None:
        obj["metadata"]["annotations"] = {BACKEND: backend}
    return obj


def kubectl(cluster: LocalCluster, namespace: str, *args: str, obj: Any = None) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("-n", namespace, *args, input=yaml.safe_dump(obj) if obj is not None else None)


def get(cluster: LocalCluster, namespace: str, resource: str, name: str) -> dict[str, Any]:
    result = kubectl(cluster, namespace, "get", resource, name, "-o", "json")
    assert result.returncode == 0, result.stderr
    loaded: dict[str, Any] = json.loads(result.stdout)
    return loaded


def test_a_v2_worker_backend_is_stored_as_the_annotation(cluster: LocalCluster, webhook: OperatorWebhook,
                                                         namespace: str) -> None:
    created = kubectl(cluster, namespace, "create", "-f", "-", obj=job("kubeflow.org/v2", "pi", "IndexedJob"))
    assert created.returncode == 0, created.stderr
    assert "Warning: spec.workerBackend: with IndexedJob, worker pods are named pi-worker-<index>-<random>" in (
        created.stderr)

    def both() -> tuple[dict[str, Any], dict[str, Any]] | None:  # one resourceVersion through both versions
        stored = get(cluster, namespace, "mpijobs.v2beta1.kubeflow.org", "pi")
        served = get(cluster, namespace, "mpijobs.v2.kubeflow.org", "pi")
        return (stored, served) if stored["metadata"]["resourceVersion"] == served["metadata"][
            "resourceVersion"] else None

    stored, served = until(both, timeout=30, what="pi read at one resourceVersion through both versions")
    assert stored["metadata"]["annotations"] == {BACKEND: "IndexedJob"}
    assert "workerBackend" not in stored["spec"]
    assert "annotations" not in served["metadata"]
    assert served["spec"]["workerBackend"] == "IndexedJob"


def test_a_v2beta1_annotation_naming_no_backend_is_denied(cluster: LocalCluster, webhook: OperatorWebhook,
                                                          namespace: str) -> None:
    created = kubectl(cluster, namespace, "create", "-f", "-", obj=job("kubeflow.org/v2beta1", "pi", "indexedjob"))
    assert created.returncode != 0
    assert created.stderr.strip() == (  # kubectl renders the 422's causes as the API server's own
        f'The MPIJob "pi" is invalid: metadata.annotations[{BACKEND}]: Unsupported value: "indexedjob": supported '
        'values: "Pods", "IndexedJob"')


@pytest.mark.parametrize(("api_version", "patch", "message"), [
    ("kubeflow.org/v2beta1", {"metadata": {"annotations": {BACKEND: "Pods"}}},
     f'metadata.annotations[{BACKEND}]: Invalid value: "Pods": field is immutable: the worker backend is chosen '
     "when the job is created"),
    ("kubeflow.org/v2", {"spec": {"workerBackend": "Pods"}},
     "spec.workerBackend: Invalid value: workerBackend is immutable"),  # the API server's CEL rule, first
], ids=["v2beta1", "v2"])
def test_changing_the_backend_is_denied(cluster: LocalCluster, webhook: OperatorWebhook, namespace: str,
                                        api_version: str, patch: dict[str, Any], message: str) -> None:
    created = kubectl(cluster, namespace, "create", "-f", "-", obj=job(api_version, "pi", "IndexedJob"))
    assert created.returncode == 0, created.stderr
    resource = f"mpijobs.{api_version.rpartition('/')[2]}.kubeflow.org"
    patched = kubectl(cluster, namespace, "patch", resource, "pi", "--type=merge", "-p", json.dumps(patch))
    assert patched.returncode != 0
    assert patched.stderr.strip() == f'The MPIJob "pi" is invalid: {message}'
    stored = get(cluster, namespace, "mpijobs.v2beta1.kubeflow.org", "pi")
    assert stored["metadata"]["annotations"] == {BACKEND: "IndexedJob"}


def pod(name: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [dict(CONTAINER)]}}


@pytest.mark.parametrize(("labels", "annotations", "rank"), [
    ({WORKER_JOB_LABEL: "pi", JOB_COMPLETION_INDEX: "4"}, None, "4"),
    ({WORKER_JOB_LABEL: "pi", JOB_COMPLETION_INDEX: "4"}, {REPLICA_INDEX_OFFSET_ANNOTATION: "1"}, "5"),
    ({WORKER_JOB_LABEL: "pi"}, {JOB_COMPLETION_INDEX: "2", REPLICA_INDEX_OFFSET_ANNOTATION: "1"}, "3"),
], ids=["index", "index plus offset", "index annotation plus offset"])
def test_a_worker_job_pod_gets_its_rank_label(cluster: LocalCluster, webhook: OperatorWebhook, namespace: str,
                                              labels: dict[str, str], annotations: dict[str, str] | None,
                                              rank: str) -> None:
    created = kubectl(cluster, namespace, "create", "-f", "-", obj=pod("pi-worker-x", labels, annotations))
    assert created.returncode == 0, created.stderr
    stored = get(cluster, namespace, "pod", "pi-worker-x")
    assert stored["metadata"]["labels"] == {**labels, RANK: rank}


@pytest.mark.parametrize("labels", [
    {JOB_COMPLETION_INDEX: "4"},  # not a worker Job's pod: the objectSelector keeps the webhook out of it
    {WORKER_JOB_LABEL: "pi"},  # no index: allowed unchanged
    {WORKER_JOB_LABEL: "pi", JOB_COMPLETION_INDEX: "four"},  # a malformed index: allowed unchanged
], ids=["no worker-job label", "no index", "a malformed index"])
def test_other_pods_are_untouched(cluster: LocalCluster, webhook: OperatorWebhook, namespace: str,
                                  labels: dict[str, str]) -> None:
    created = kubectl(cluster, namespace, "create", "-f", "-", obj=pod("other", labels))
    assert created.returncode == 0, created.stderr
    assert get(cluster, namespace, "pod", "other")["metadata"]["labels"] == labels


def test_the_job_controllers_pods_get_their_rank(cluster: LocalCluster, webhook: OperatorWebhook,
                                                namespace: str) -> None:
    """An Indexed Job as the IndexedJob backend makes it (the worker-job label and, under runLauncherAsWorker, the
    offset on its template): each pod the real Job controller creates has the rank index + 1."""
    template = {"metadata": {"labels": {WORKER_JOB_LABEL: "pi"}, "annotations": {REPLICA_INDEX_OFFSET_ANNOTATION: "1"}},
                "spec": {"restartPolicy": "Never", "containers": [dict(CONTAINER)]}}
    worker_job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi-worker"},
                  "spec": {"completionMode": "Indexed", "completions": 3, "parallelism": 3, "template": template}}
    created = kubectl(cluster, namespace, "create", "-f", "-", obj=worker_job)
    assert created.returncode == 0, created.stderr

    def three_pods() -> list[dict[str, Any]] | None:
        listed = kubectl(cluster, namespace, "get", "pods", "-l", "batch.kubernetes.io/job-name=pi-worker", "-o",
                         "json")
        items: list[dict[str, Any]] = json.loads(listed.stdout)["items"] if listed.returncode == 0 else []
        return items if len(items) == 3 else None

    pods = until(three_pods, timeout=60, what="the Job controller creating 3 pods")
    ranks = {p["metadata"]["labels"][JOB_COMPLETION_INDEX]: p["metadata"]["labels"].get(RANK) for p in pods}
    assert ranks == {"0": "1", "1": "2", "2": "3"}
    assert sorted(p["spec"]["hostname"] for p in pods) == ["pi-worker-0", "pi-worker-1", "pi-worker-2"]
