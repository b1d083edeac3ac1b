"""The ConfigMap size admission checks (shared/api/config_map_size.py): exactly the length of what the reconciler
builds, the largest worker count that fits, and the webhook's refusal and warning."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.mpijob.builders import build_config_map
from shared.api import MPIJob
from shared.api.config_map_size import (
    CONFIG_MAP_MAX_BYTES,
    CONFIG_MAP_WARN_BYTES,
    config_map_size,
    config_map_size_errors,
    config_map_size_warnings,
    largest_fitting_workers,
)
from tests.unit.reconciler.helpers import make_job, replica
from webhook.admission import validate_request

LONG_NAME = "a" * 36 + "-job"  # 40 characters
LONG_NAMESPACE = "team-" + "n" * 25  # 30 characters
DOMAIN = "cluster.local"


def sized_job(name: str, namespace: str, workers: int, **spec: Any) -> MPIJob:
    return make_job(name, namespace, mpiReplicaSpecs={"Launcher": replica(), "Worker": replica(replicas=workers)},
                    **spec)


def built_size(job: MPIJob, domain: str, workers: int) -> int:
    """What the API server counts in the ConfigMap the reconciler builds with every worker Running."""
    running = [f"{job.name}-worker-{i}" for i in range(workers)]
    data = build_config_map(job, domain, running)["data"]
    return sum(len(key) + len(value) for key, value in data.items())


@pytest.mark.parametrize("implementation", ["OpenMPI", "Intel", "MPICH"])
@pytest.mark.parametrize("slots", [1, 12])
@pytest.mark.parametrize("launcher_as_worker", [False, True], ids=["workers only", "launcher as worker"])
@pytest.mark.parametrize(("name", "namespace"), [("pi", "default"), (LONG_NAME, LONG_NAMESPACE)],
                         ids=["short names", "long names"])
@pytest.mark.parametrize("domain", ["", DOMAIN])
@pytest.mark.parametrize("workers", [0, 1, 9, 10, 11, 99, 100, 101, 1000])
def test_the_size_is_the_length_of_the_built_config_map(
        implementation: str, slots: int, launcher_as_worker: bool, name: str, namespace: str, domain: str,
        workers: int) -> None:
    job = sized_job(name, namespace, workers, mpiImplementation=implementation, slotsPerWorker=slots,
                    runLauncherAsWorker=launcher_as_worker)
    assert config_map_size(job, domain) == built_size(job, domain, workers)


@pytest.mark.parametrize(("name", "namespace", "domain", "fits"), [
    ("pi", "default", "", 14_276),
    (LONG_NAME, LONG_NAMESPACE, DOMAIN, 3_514),
    (LONG_NAME, LONG_NAMESPACE, "", 3_877),
])
def test_the_largest_fitting_worker_count_is_exact(name: str, namespace: str, domain: str, fits: int) -> None:
    job = sized_job(name, namespace, 6_000)
    assert largest_fitting_workers(job, domain) == fits
    assert config_map_size(job, domain, fits) <= CONFIG_MAP_MAX_BYTES < config_map_size(job, domain, fits + 1)
    assert built_size(sized_job(name, namespace, fits), domain, fits) <= CONFIG_MAP_MAX_BYTES
    assert built_size(sized_job(name, namespace, fits + 1), domain, fits + 1) > CONFIG_MAP_MAX_BYTES


def admission_review(name: str, namespace: str, workers: int) -> dict[str, Any]:
    container = {"name": "main", "image": "mpi-pi"}
    job = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
           "metadata": {"name": name, "namespace": namespace},
           "spec": {"mpiReplicaSpecs": {"Launcher": {"template": {"spec": {"containers": [container]}}},
                                        "Worker": {"replicas": workers,
                                                   "template": {"spec": {"containers": [container]}}}}}}
    return {"uid": "u-1", "kind": {"group": "kubeflow.org", "version": "v2beta1", "kind": "MPIJob"},
            "name": name, "namespace": namespace, "operation": "CREATE", "object": job, "oldObject": None}


def test_admission_refuses_a_job_whose_config_map_cannot_fit_with_the_largest_count_that_does() -> None:
    job = sized_job(LONG_NAME, LONG_NAMESPACE, 6_000)
    size = config_map_size(job, DOMAIN)
    answer = validate_request(admission_review(LONG_NAME, LONG_NAMESPACE, 6_000), cluster_domain=DOMAIN)
    assert answer.outcome == "denied"
    detail = (f'the hostfile and discover_hosts.sh of ConfigMap "{LONG_NAME}-config" would need {size} bytes, '
              "more than the 1048576 bytes a ConfigMap can hold; at most 3514 workers fit with these names")
    assert answer.response["status"] == {
        "apiVersion": "v1", "kind": "Status", "status": "Failure", "reason": "Invalid", "code": 422,
        "message": f'MPIJob.kubeflow.org "{LONG_NAME}" is invalid: spec.mpiReplicaSpecs[Worker].replicas: '
                   f"Invalid value: 6000: {detail}",
        "details": {"name": LONG_NAME, "group": "kubeflow.org", "kind": "MPIJob",
                    "causes": [{"reason": "FieldValueInvalid", "message": f"Invalid value: 6000: {detail}",
                                "field": "spec.mpiReplicaSpecs[Worker].replicas"}]}}
    assert size == 1_791_815


def test_the_cluster_domain_decides_whether_a_job_fits() -> None:
    """3,700 workers fit with ``...svc`` names but not with ``...svc.cluster.local``: the webhook's flag counts."""
    assert validate_request(admission_review(LONG_NAME, LONG_NAMESPACE, 3_700)).outcome == "allowed"
    assert validate_request(admission_review(LONG_NAME, LONG_NAMESPACE, 3_700), cluster_domain=DOMAIN).outcome == (
        "denied")


def test_admission_warns_past_half_the_limit_only() -> None:
    half = max(w for w in range(7_000, 7_500)
               if config_map_size(sized_job("pi", "default", w)) <= CONFIG_MAP_WARN_BYTES)
    under = validate_request(admission_review("pi", "default", half))
    assert under.outcome == "allowed"
    assert "warnings" not in under.response
    over = validate_request(admission_review("pi", "default", half + 1))
    size = config_map_size(sized_job("pi", "default", half + 1))
    assert over.outcome == "allowed"
    assert over.response["warnings"] == [
        f'spec.mpiReplicaSpecs[Worker].replicas: ConfigMap "pi-config" will hold {size} bytes with every worker '
        "running, over half the 1048576 a ConfigMap can hold; at most 14276 workers fit with these names"]
    assert CONFIG_MAP_WARN_BYTES < size <= CONFIG_MAP_MAX_BYTES


def test_a_refused_job_gets_no_warning_and_a_job_without_workers_no_error() -> None:
    too_big = sized_job("pi", "default", 20_000)
    assert config_map_size_warnings(too_big) == []
    assert len(config_map_size_errors(too_big)) == 1
    launcher_only = make_job("pi", "default", mpiReplicaSpecs={"Launcher": replica()})
    assert config_map_size_errors(launcher_only) == []
    assert config_map_size_warnings(launcher_only) == []


def update_review(old_workers: int, new_workers: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    request = admission_review(LONG_NAME, LONG_NAMESPACE, new_workers)
    old = admission_review(LONG_NAME, LONG_NAMESPACE, old_workers)["object"]
    if labels:
        request["object"]["metadata"]["labels"] = labels
    return {**request, "operation": "UPDATE", "oldObject": old}


def test_an_update_is_refused_only_for_a_size_problem_it_adds() -> None:
    """Ratcheting: a job stored too large (before the webhook, or with another domain) can still be labelled;
    raising a fitting job's workers past what fits is refused."""
    assert validate_request(update_review(6_000, 6_000, {"team": "a"}), cluster_domain=DOMAIN).outcome == "allowed"
    refused = validate_request(update_review(3_000, 6_000), cluster_domain=DOMAIN)
    assert refused.outcome == "denied"
    assert [e.field for e in refused.errors] == ["spec.mpiReplicaSpecs[Worker].replicas"]
    assert validate_request(update_review(3_000, 3_514), cluster_domain=DOMAIN).outcome == "allowed"
