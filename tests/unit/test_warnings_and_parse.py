"""Admission warnings and the parsing of wrongly typed MPIJobs into field errors."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api import MPIJob, admission_warnings, parse_mpijob
from shared.api.parse import field_path
from tests.unit.helpers import wire, with_defaults


def job(worker_pod: dict[str, Any] | None = None, launcher_pod: dict[str, Any] | None = None,
        **spec: Any) -> MPIJob:
    def template(pod: dict[str, Any] | None) -> dict[str, Any]:
        return {"spec": {"containers": [{"name": "c", "image": "i"}], **(pod or {})}}

    return with_defaults(MPIJob.model_validate({"metadata": {"name": "pi"}, "spec": {
        "mpiReplicaSpecs": {"Launcher": {"template": template(launcher_pod)},
                            "Worker": {"replicas": 2, "template": template(worker_pod)}}, **spec}}))


def gpu_pod(count: str, key: str = "limits") -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "i", "resources": {key: {"nvidia.com/gpu": count}}}]}


ROOT_PATH_WARNING = ("spec.sshAuthMountPath: /root/.ssh is under /root but the {} pods run as a non-root user, "
                     "who cannot read it: set sshAuthMountPath to that user's ~/.ssh")

CASES = [
    pytest.param(job(), [], id="nothing to warn about"),
    pytest.param(job(worker_pod={"securityContext": {"runAsUser": 1000}}), [ROOT_PATH_WARNING.format("Worker")],
                 id="non-root workers with the /root default"),
    pytest.param(job(worker_pod={"securityContext": {"runAsNonRoot": True}}), [ROOT_PATH_WARNING.format("Worker")],
                 id="runAsNonRoot"),
    pytest.param(job(worker_pod={"securityContext": {"runAsUser": 0, "runAsNonRoot": True}}), [],
                 id="explicit root wins"),
    pytest.param(job(launcher_pod={"containers": [{"name": "c", "securityContext": {"runAsUser": 1000}}]}),
                 [ROOT_PATH_WARNING.format("Launcher")], id="container-level user"),
    pytest.param(job(worker_pod={"securityContext": {"runAsUser": 1000}}, sshAuthMountPath="/home/mpiuser/.ssh"),
                 [], id="non-root with its own home"),
    pytest.param(job(worker_pod=gpu_pod("4")), [
        "spec.slotsPerWorker: 1 slot(s) per worker but each worker requests 4 GPU(s): set slotsPerWorker to 4 to "
        "run one process per GPU"], id="GPUs and slots differ"),
    pytest.param(job(worker_pod=gpu_pod("4"), slotsPerWorker=4), [], id="GPUs and slots agree"),
    pytest.param(job(worker_pod=gpu_pod("2", "requests"), slotsPerWorker=4), [
        "spec.slotsPerWorker: 4 slot(s) per worker but each worker requests 2 GPU(s): set slotsPerWorker to 2 to "
        "run one process per GPU"], id="GPU requests count when limits are absent"),
    pytest.param(job(launcher_pod={"restartPolicy": "Always"}), [
        "spec.mpiReplicaSpecs[Launcher].template.spec.restartPolicy: Always is overridden by the replica "
        "restartPolicy OnFailure"], id="template restartPolicy overridden"),
    pytest.param(job(worker_pod={"restartPolicy": "Never"}), [], id="template restartPolicy that agrees"),
]


@pytest.mark.parametrize(("given", "expected"), CASES)
def test_admission_warnings(given: MPIJob, expected: list[str]) -> None:
    assert admission_warnings(given) == expected


def test_parse_reports_every_wrongly_typed_field() -> None:
    parsed, errors = parse_mpijob({"metadata": {"name": "pi"}, "spec": {
        "slotsPerWorker": "1", "runLauncherAsWorker": "yes",
        "mpiReplicaSpecs": {"Launcher": {"replicas": 1.5}, "Worker": []}}})
    assert parsed is None
    assert [str(e) for e in errors] == [
        'spec.slotsPerWorker: Invalid value: "1": must be of type integer',
        'spec.runLauncherAsWorker: Invalid value: "yes": must be of type boolean',
        "spec.mpiReplicaSpecs[Launcher].replicas: Invalid value: 1.5: must be of type integer",
        "spec.mpiReplicaSpecs[Worker]: Invalid value: []: must be of type object",
    ]


def test_parse_of_a_non_object() -> None:
    assert [str(e) for e in parse_mpijob(["not", "an", "object"])[1]] == [
        '<root>: Invalid value: ["not","an","object"]: must be of type object']


def test_parse_keeps_a_valid_job() -> None:
    parsed, errors = parse_mpijob({"metadata": {"name": "pi"}, "spec": {"slotsPerWorker": 2}})
    assert errors == []
    assert parsed is not None
    assert wire(parsed) == {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "pi"},
                          "spec": {"slotsPerWorker": 2}}


@pytest.mark.parametrize(("loc", "path"), [
    (("spec", "slotsPerWorker"), "spec.slotsPerWorker"),
    (("spec", "mpiReplicaSpecs", "Launcher", "template"), "spec.mpiReplicaSpecs[Launcher].template"),
    (("status", "conditions", 0, "type"), "status.conditions[0].type"),
])
def test_field_path(loc: tuple[Any, ...], path: str) -> None:
    assert field_path(loc) == path
