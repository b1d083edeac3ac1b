"""The worker backend's admission (shared/api/worker_backend_validation.py) and the rank label of a worker Job's pod
(shared/api/worker_backend.py, webhook/pod_index.py): whole error lists, whole patches."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api import constants as c
from shared.api import defaulted_dict, parse_mpijob
from shared.api.types import MPIJob
from shared.api.v2_spec_annotation import annotation_of
from shared.api.v2types import MPIJobV2
from shared.api.version_validation import version_errors
from shared.api.worker_backend import (
    JOB_COMPLETION_INDEX,
    REPLICA_INDEX_OFFSET_ANNOTATION,
    WORKER_BACKEND_ANNOTATION,
    WORKER_JOB_LABEL,
    pod_replica_index,
    worker_job_name,
)
from shared.api.worker_backend_validation import indexed_job_errors, indexed_job_warnings
from webhook.pod_index import mutate_pod, replica_index_patch

CONTAINER = {"name": "main", "image": "mpi-pi"}
ANNOTATION_PATH = f"metadata.annotations[{WORKER_BACKEND_ANNOTATION}]"
WORKER = "spec.mpiReplicaSpecs[Worker]"
RULE = {"name": "disrupted", "action": "RestartJob", "onPodConditions": [{"type": "DisruptionTarget"}]}


def job(version: str = c.API_VERSION, backend: str | None = None, **worker: Any) -> dict[str, Any]:
    """A job of ``version`` naming ``backend`` (the v2 field or the v2beta1 annotation), the Worker spec with
    ``worker``'s template spec fields (``labels`` and ``restartPolicy`` go to their places)."""
    labels, restart_policy = worker.pop("labels", None), worker.pop("restartPolicy", None)
    template: dict[str, Any] = {"spec": {"containers": [dict(CONTAINER)], **worker}}
    if labels is not None:
        template["metadata"] = {"labels": labels}
    worker_spec: dict[str, Any] = {"replicas": 2, "template": template}
    if restart_policy is not None:
        worker_spec["restartPolicy"] = restart_policy
    obj: dict[str, Any] = {"apiVersion": version, "kind": "MPIJob", "metadata": {"name": "pi", "namespace": "ns"},
                           "spec": {"mpiReplicaSpecs": {"Launcher": {"template": {"spec": {
                               "containers": [dict(CONTAINER)]}}}, "Worker": worker_spec}}}
    if backend is not None and version == c.API_VERSION_V2:
        obj["spec"]["workerBackend"] = backend
    elif backend is not None:
        obj["metadata"]["annotations"] = {WORKER_BACKEND_ANNOTATION: backend}
    return obj


def parsed(obj: dict[str, Any]) -> MPIJob:
    model = MPIJobV2 if obj["apiVersion"] == c.API_VERSION_V2 else MPIJob
    result, errors = parse_mpijob(defaulted_dict(obj), model)
    assert result is not None, errors
    return result


def errors_of(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [str(e) for e in version_errors(parsed(obj), obj, old)]


NO_ERRORS = [
    ("v2beta1, none", job()),
    ("v2beta1, Pods", job(backend="Pods")),
    ("v2beta1, IndexedJob", job(backend="IndexedJob")),
    ("v2, none", job(c.API_VERSION_V2)),
    ("v2, IndexedJob", job(c.API_VERSION_V2, "IndexedJob")),
    ("Pods: hostname and labels as upstream takes them", job(
        backend="Pods", hostname="h", subdomain="s", labels={"job-name": "x", "controller-uid": "u"})),
    ("IndexedJob: the job-name labels with the worker Job's name", job(
        backend="IndexedJob", labels={"job-name": "pi-worker", "batch.kubernetes.io/job-name": "pi-worker"})),
    ("IndexedJob: activeDeadlineSeconds and a template restartPolicy (the replica's wins)", job(
        backend="IndexedJob", activeDeadlineSeconds=60, restartPolicy="OnFailure")),
]


@pytest.mark.parametrize("obj", [o for _, o in NO_ERRORS], ids=[i for i, _ in NO_ERRORS])
def test_valid_backends(obj: dict[str, Any]) -> None:
    assert errors_of(obj) == []


def test_a_v2beta1_annotation_that_names_no_backend() -> None:
    assert errors_of(job(backend="indexedjob")) == [
        f'{ANNOTATION_PATH}: Unsupported value: "indexedjob": supported values: "Pods", "IndexedJob"']


def test_a_v2_field_that_names_no_backend_and_the_annotation_on_a_v2_object() -> None:
    obj = job(c.API_VERSION_V2, "JobSet")
    obj["metadata"]["annotations"] = {WORKER_BACKEND_ANNOTATION: "IndexedJob"}
    assert errors_of(obj) == [
        f"{ANNOTATION_PATH}: Forbidden: is reserved for storing spec.workerBackend in kubeflow.org/v2beta1; set "
        "spec.workerBackend instead",
        'spec.workerBackend: Unsupported value: "JobSet": supported values: "Pods", "IndexedJob"',
    ]


IMMUTABLE = "field is immutable: the worker backend is chosen when the job is created"
UPDATES = [
    ("added", None, "IndexedJob", [f'{{path}}: Invalid value: "IndexedJob": {IMMUTABLE}']),
    ("removed", "IndexedJob", None, [f"{{path}}: Invalid value: null: {IMMUTABLE}"]),
    ("changed", "Pods", "IndexedJob", [f'{{path}}: Invalid value: "IndexedJob": {IMMUTABLE}']),
    ("kept", "IndexedJob", "IndexedJob", []),
    ("kept absent", None, None, []),
]


@pytest.mark.parametrize("version", [c.API_VERSION, c.API_VERSION_V2])
@pytest.mark.parametrize(("old", "new", "expected"), [u[1:] for u in UPDATES], ids=[u[0] for u in UPDATES])
def test_the_backend_is_immutable(version: str, old: str | None, new: str | None, expected: list[str]) -> None:
    path = ANNOTATION_PATH if version == c.API_VERSION else "spec.workerBackend"
    assert errors_of(job(version, new), job(version, old)) == [e.format(path=path) for e in expected]


@pytest.mark.parametrize("version", [c.API_VERSION, c.API_VERSION_V2])
def test_what_the_job_api_refuses_in_an_indexed_job_worker_template(version: str) -> None:
    labels = {"job-name": "pi", "batch.kubernetes.io/job-name": "pi-worker", "controller-uid": "u",
              "batch.kubernetes.io/controller-uid": "u", "team": "a"}
    obj = job(version, "IndexedJob", hostname="w", subdomain="pi", labels=labels)
    assert errors_of(obj) == [
        f"{WORKER}.template.spec.hostname: Forbidden: must not be set with the IndexedJob worker backend: the Job "
        "controller names each worker's host <job>-worker-<index>",
        f"{WORKER}.template.spec.subdomain: Forbidden: must not be set with the IndexedJob worker backend: the "
        "operator sets it to the job's Service, <job>",
        f'{WORKER}.template.metadata.labels[job-name]: Invalid value: "pi": must be unset or pi-worker with the '
        "IndexedJob worker backend: the worker Job's name, by which it selects its pods",
        f"{WORKER}.template.metadata.labels[batch.kubernetes.io/controller-uid]: Forbidden: must not be set with the "
        "IndexedJob worker backend: the API server sets it to the worker Job's UID, by which it selects its pods",
        f"{WORKER}.template.metadata.labels[controller-uid]: Forbidden: must not be set with the IndexedJob worker "
        "backend: the API server sets it to the worker Job's UID, by which it selects its pods",
    ]


@pytest.mark.parametrize("version", [c.API_VERSION, c.API_VERSION_V2])
def test_a_worker_restart_policy_on_failure_with_a_failure_policy_is_valid(version: str) -> None:
    """The failurePolicy is the operator's to evaluate, not mapped onto the worker Job's podFailurePolicy (which would
    require Never): OnFailure workers keep restarting in place, as under Pods."""
    policy = {"maxRestarts": 1, "rules": [RULE]}
    obj = job(version, "IndexedJob", restartPolicy="OnFailure")
    if version == c.API_VERSION_V2:
        obj["spec"]["runPolicy"] = {"failurePolicy": policy}
    else:
        obj["spec"]["runPolicy"] = {}
        obj["metadata"]["annotations"][c.V2_SPEC_ANNOTATION] = annotation_of(policy)
    assert errors_of(obj) == []


def test_the_reconciler_applies_the_rules_with_its_default_backend() -> None:
    """A job that names no backend is checked by the reconciler when its --default-worker-backend is IndexedJob."""
    obj = job(hostname="w")
    assert errors_of(obj) == []
    assert [str(e) for e in indexed_job_errors(parsed(obj))] == [
        f"{WORKER}.template.spec.hostname: Forbidden: must not be set with the IndexedJob worker backend: the Job "
        "controller names each worker's host <job>-worker-<index>"]
    assert indexed_job_errors(parsed(job(hostname="w") | {"spec": {"mpiReplicaSpecs": {"Launcher": {}}}})) == []


@pytest.mark.parametrize(("version", "path"), [(c.API_VERSION, ANNOTATION_PATH), (c.API_VERSION_V2,
                                                                                 "spec.workerBackend")])
def test_the_warning_of_an_indexed_job_backend(version: str, path: str) -> None:
    obj = job(version, "IndexedJob")
    assert indexed_job_warnings(parsed(obj), obj) == [
        f"{path}: with IndexedJob, worker pods are named pi-worker-<index>-<random> (hostnames unchanged): select one "
        "by label, e.g. kubectl logs -l training.kubeflow.org/job-name=pi,batch.kubernetes.io/job-completion-index=0"]
    assert indexed_job_warnings(parsed(job(version, "Pods")), job(version, "Pods")) == []


def test_the_worker_job_name() -> None:
    assert worker_job_name("pi") == "pi-worker"


# ---- the rank label of a worker Job's pod

def pod(labels: dict[str, Any] | None = None, annotations: dict[str, Any] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"generateName": "pi-worker-3-", "namespace": "ns"}
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [dict(CONTAINER)]}}


WORKER_JOB = {WORKER_JOB_LABEL: "pi"}
RANK = "/metadata/labels/training.kubeflow.org~1replica-index"
PODS = [
    ("the index label", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "3"}), 3, ""),
    ("the index annotation", pod(WORKER_JOB, {JOB_COMPLETION_INDEX: "12"}), 12, ""),
    ("the label before the annotation", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "3"}, {JOB_COMPLETION_INDEX: "4"}),
     3, ""),
    ("an offset (runLauncherAsWorker)", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "0"},
                                            {REPLICA_INDEX_OFFSET_ANNOTATION: "1"}), 1, ""),
    ("no index", pod(WORKER_JOB), None, "no_index"),
    ("no metadata maps", {"metadata": {}}, None, "no_index"),
    ("a negative index", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "-1"}), None, "malformed_index"),
    ("a leading zero", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "01"}), None, "malformed_index"),
    ("not digits", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "three"}), None, "malformed_index"),
    ("other digits", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "٣"}), None, "malformed_index"),
    ("beyond int32", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: str(2**31)}), None, "malformed_index"),
    ("not a string", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: 3}), None, "malformed_index"),
    ("empty", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: ""}), None, "malformed_index"),
    ("more digits than int() converts", pod(WORKER_JOB, {JOB_COMPLETION_INDEX: "1" * 5000}), None,
     "malformed_index"),
    ("the largest index", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: str(2**31 - 1)}), 2**31 - 1, ""),
    ("a malformed offset", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "3"}, {REPLICA_INDEX_OFFSET_ANNOTATION: "+1"}),
     None, "malformed_offset"),
]


@pytest.mark.parametrize(("obj", "index", "problem"), [p[1:] for p in PODS], ids=[p[0] for p in PODS])
def test_pod_replica_index(obj: dict[str, Any], index: int | None, problem: str) -> None:
    assert pod_replica_index(obj) == (index, problem)


PATCHES = [
    ("added", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "3"}), [{"op": "add", "path": RANK, "value": "3"}]),
    ("replaced (upstream sets it on every worker)", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "3",
                                                         c.LABEL_REPLICA_INDEX: "7"}),
     [{"op": "add", "path": RANK, "value": "3"}]),
    ("already right", pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "3", c.LABEL_REPLICA_INDEX: "3"}), []),
    ("no labels map", pod(None, {JOB_COMPLETION_INDEX: "5", REPLICA_INDEX_OFFSET_ANNOTATION: "1"}),
     [{"op": "add", "path": "/metadata/labels", "value": {c.LABEL_REPLICA_INDEX: "6"}}]),
    ("no index", pod(WORKER_JOB), []),
]


@pytest.mark.parametrize(("obj", "patch"), [p[1:] for p in PATCHES], ids=[p[0] for p in PATCHES])
def test_replica_index_patch(obj: dict[str, Any], patch: list[dict[str, Any]]) -> None:
    assert replica_index_patch(obj)[0] == patch


def _request(obj: Any, operation: str = "CREATE", **extra: Any) -> dict[str, Any]:
    return {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": operation,
            "object": obj, **extra}


ALLOWED = {"uid": "u-1", "allowed": True}
UNCHANGED = [
    ("no index", _request(pod(WORKER_JOB)), "no_index"),
    ("a malformed index", _request(pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "x"})), "malformed_index"),
    ("an UPDATE", _request(pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "3"}), "UPDATE"), ""),
    ("a subresource", _request(pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "3"}), subResource="status"), ""),
    ("not a pod", {**_request(pod({**WORKER_JOB, JOB_COMPLETION_INDEX: "3"})),
                   "kind": {"group": "batch", "version": "v1", "kind": "Job"}}, "not_a_pod"),
]


@pytest.mark.parametrize(("request_", "skipped"), [u[1:] for u in UNCHANGED], ids=[u[0] for u in UNCHANGED])
def test_mutate_pod_allows_unchanged(request_: dict[str, Any], skipped: str) -> None:
    """Never denied: the pod runs, only without its rank label, and the answer says why for the log and metric."""
    answer = mutate_pod(request_)
    assert (answer.response, answer.outcome, answer.skipped) == (ALLOWED, "allowed", skipped)
