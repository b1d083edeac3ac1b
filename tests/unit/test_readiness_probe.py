"""The workers' readinessProbe at admission (shared/api/readiness_probe.py): the warning of a WaitForWorkersReady
job whose workers have none, and the opt-in default probe's JSON Patch."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api import MPIJob, admission_warnings
from shared.api.readiness_probe import PROBE_ANNOTATION, probe_patch, probe_port
from tests.unit.helpers import with_defaults

NO_PROBE = ('spec.mpiReplicaSpecs[Worker].template.spec.containers: no readinessProbe, so a worker is Ready when its '
            "containers start, not when sshd listens, and the launcher may start too early: add a tcpSocket probe on "
            f"sshd's port, or the annotation {PROBE_ANNOTATION}: \"<port>\"")
PROBE = {"tcpSocket": {"port": 2222}, "periodSeconds": 2}
PATH = "/spec/mpiReplicaSpecs/Worker/template/spec/containers/0/readinessProbe"


def job_dict(policy: str | None = "WaitForWorkersReady", containers: list[Any] | None = None, replicas: int = 2,
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"mpiReplicaSpecs": {
        "Launcher": {"template": {"spec": {"containers": [{"name": "l", "image": "i"}]}}},
        "Worker": {"replicas": replicas, "template": {"spec": {
            "containers": containers if containers is not None else [{"name": "w", "image": "i"}]}}}}}
    if policy is not None:
        spec["launcherCreationPolicy"] = policy
    metadata: dict[str, Any] = {"name": "pi", **({"annotations": annotations} if annotations else {})}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": metadata, "spec": spec}


def job(**kwargs: Any) -> MPIJob:
    return with_defaults(MPIJob.model_validate(job_dict(**kwargs)))


SIDECAR = [{"name": "w", "image": "i"}, {"name": "sshd", "image": "i", "readinessProbe": PROBE}]


@pytest.mark.parametrize(("given", "expected"), [
    pytest.param(job(), [NO_PROBE], id="waits for workers without a probe"),
    pytest.param(job(containers=[{"name": "w", "image": "i", "readinessProbe": PROBE}]), [], id="a probe"),
    pytest.param(job(containers=SIDECAR), [], id="a probe on another container"),
    pytest.param(job(policy=None), [], id="AtStartup by default: no gate, no warning"),
    pytest.param(job(policy="AtStartup"), [], id="AtStartup"),
    pytest.param(job(replicas=0), [], id="no workers"),
    pytest.param(job(annotations={PROBE_ANNOTATION: "ssh"}), [
        f"metadata.annotations[{PROBE_ANNOTATION}]: 'ssh' is not a port number (1-65535): no readinessProbe is "
        "added", NO_PROBE], id="an annotation that is not a port"),
    pytest.param(job(policy="AtStartup", annotations={PROBE_ANNOTATION: "70000"}), [
        f"metadata.annotations[{PROBE_ANNOTATION}]: '70000' is not a port number (1-65535): no readinessProbe is "
        "added"], id="a port out of range"),
])
def test_warnings(given: MPIJob, expected: list[str]) -> None:
    assert admission_warnings(given) == expected


@pytest.mark.parametrize(("value", "port"), [
    ("22", 22), ("2222", 2222), ("65535", 65535), ("0", None), ("65536", None), (" 22", None), ("-1", None),
    ("true", None), ("", None)])
def test_probe_port(value: str, port: int | None) -> None:
    assert probe_port({PROBE_ANNOTATION: value}) == port


@pytest.mark.parametrize(("given", "expected"), [
    pytest.param(job_dict(annotations={PROBE_ANNOTATION: "2222"}), [{"op": "add", "path": PATH, "value": PROBE}],
                 id="asked: added to the first container"),
    pytest.param(job_dict(policy="AtStartup", annotations={PROBE_ANNOTATION: "2222"}),
                 [{"op": "add", "path": PATH, "value": PROBE}], id="asked, whatever the policy"),
    pytest.param(job_dict(), [], id="not asked"),
    pytest.param(job_dict(annotations={PROBE_ANNOTATION: "ssh"}), [], id="not a port"),
    pytest.param(job_dict(containers=SIDECAR, annotations={PROBE_ANNOTATION: "22"}), [],
                 id="a probe of the user's wins"),
    pytest.param(job_dict(containers=[], annotations={PROBE_ANNOTATION: "22"}), [], id="no container"),
    pytest.param(job_dict(containers=["x"], annotations={PROBE_ANNOTATION: "22"}), [], id="a malformed container"),
    pytest.param({**job_dict(), "metadata": ["not", "an", "object"]}, [], id="metadata not an object"),
    pytest.param({**job_dict(), "metadata": {"annotations": [PROBE_ANNOTATION]}}, [], id="annotations not an object"),
    pytest.param({**job_dict(), "metadata": None}, [], id="metadata null"),
])
def test_probe_patch(given: dict[str, Any], expected: list[dict[str, Any]]) -> None:
    assert probe_patch(given) == expected
