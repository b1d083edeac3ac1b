"""Validation: upstream's TestValidateMPIJob (spec/api.md 7.2) with exact messages, then our extra rules."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api import MPIJob, aggregate, invalid_status, validate, validate_update, validate_upstream

C: dict[str, Any] = {"spec": {"containers": [{}]}}
DNS1035 = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def mpijob(name: str = "foo", **spec: Any) -> MPIJob:
    return MPIJob.model_validate({"metadata": {"name": name}, "spec": spec})


def valid_intel(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "slotsPerWorker": 2,
        "runPolicy": {"cleanPodPolicy": "Running"},
        "sshAuthMountPath": "/home/mpiuser/.ssh",
        "mpiImplementation": "Intel",
        "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "restartPolicy": "Never", "template": C}},
    }
    return {**spec, **overrides}


WITH_WORKER = {
    "Launcher": {"replicas": 1, "restartPolicy": "OnFailure", "template": C},
    "Worker": {"replicas": 3, "restartPolicy": "Never", "template": C},
}

UPSTREAM_CASES = [
    pytest.param(mpijob(**valid_intel()), [], id="valid (intel)"),
    pytest.param(mpijob(**valid_intel(mpiReplicaSpecs=WITH_WORKER)), [], id="valid with worker (intel)"),
    pytest.param(mpijob(**valid_intel(mpiImplementation="MPICH")), [], id="valid (mpich)"),
    pytest.param(
        mpijob(**valid_intel(mpiImplementation="MPICH", mpiReplicaSpecs=WITH_WORKER)), [],
        id="valid with worker (mpich)",
    ),
    pytest.param(
        MPIJob.model_validate({}),
        [
            'metadata.name: Invalid value: "": will not able to create pod and service with invalid DNS label '
            f'"-worker-0": {DNS1035}',
            "spec.mpiReplicaSpecs: Required value: must have replica specs",
            "spec.slotsPerWorker: Required value: must have number of slots per worker",
            "spec.runPolicy.cleanPodPolicy: Required value: must have clean Pod policy",
            "spec.sshAuthMountPath: Required value: must have a mount path for SSH credentials",
            'spec.mpiImplementation: Unsupported value: "": supported values: "Intel", "MPICH", "OpenMPI"',
        ],
        id="empty job",
    ),
    pytest.param(
        mpijob(
            "this-name-is-waaaaaaaay-too-long-for-a-worker-hostname",
            slotsPerWorker=2,
            runPolicy={
                "cleanPodPolicy": "unknown", "ttlSecondsAfterFinished": -1, "activeDeadlineSeconds": -1,
                "backoffLimit": -1, "managedBy": "invalid.com/controller",
            },
            sshAuthMountPath="/root/.ssh",
            mpiImplementation="Unknown",
            mpiReplicaSpecs={
                "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": C},
                "Worker": {"replicas": 1000, "restartPolicy": "Never", "template": C},
            },
        ),
        [
            'metadata.name: Invalid value: "this-name-is-waaaaaaaay-too-long-for-a-worker-hostname": will not able '
            'to create pod and service with invalid DNS label '
            '"this-name-is-waaaaaaaay-too-long-for-a-worker-hostname-worker-999": must be no more than 63 characters',
            'spec.runPolicy.cleanPodPolicy: Unsupported value: "unknown": supported values: "All", "None", "Running"',
            "spec.runPolicy.ttlSecondsAfterFinished: Invalid value: -1: must be greater than or equal to 0",
            "spec.runPolicy.activeDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
            "spec.runPolicy.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
            'spec.runPolicy.managedBy: Unsupported value: "invalid.com/controller": supported values: '
            '"kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue"',
            'spec.mpiImplementation: Unsupported value: "Unknown": supported values: "Intel", "MPICH", "OpenMPI"',
        ],
        id="invalid fields",
    ),
    pytest.param(
        mpijob(slotsPerWorker=2, runPolicy={"cleanPodPolicy": "Running"}, sshAuthMountPath="/root/.ssh",
               mpiImplementation="OpenMPI", mpiReplicaSpecs={}),
        ["spec.mpiReplicaSpecs[Launcher]: Required value: must have Launcher replica spec"],
        id="empty replica specs",
    ),
    pytest.param(
        mpijob(**valid_intel(mpiReplicaSpecs={"Launcher": {}, "Worker": {}})),
        [
            "spec.mpiReplicaSpecs[Launcher].replicas: Required value: must define number of replicas",
            'spec.mpiReplicaSpecs[Launcher].restartPolicy: Unsupported value: "": supported values: "Never", '
            '"OnFailure"',
            "spec.mpiReplicaSpecs[Launcher].template.spec.containers: Required value: must define at least one "
            "container",
            "spec.mpiReplicaSpecs[Worker].replicas: Required value: must define number of replicas",
            'spec.mpiReplicaSpecs[Worker].restartPolicy: Unsupported value: "": supported values: "Never", '
            '"OnFailure"',
            "spec.mpiReplicaSpecs[Worker].template.spec.containers: Required value: must define at least one "
            "container",
        ],
        id="missing replica spec fields",
    ),
    pytest.param(
        mpijob(**valid_intel(mpiReplicaSpecs={
            "Launcher": {"replicas": 2, "restartPolicy": "Always", "template": C},
            "Worker": {"replicas": 0, "restartPolicy": "Invalid", "template": C},
        })),
        [
            'spec.mpiReplicaSpecs[Launcher].restartPolicy: Unsupported value: "Always": supported values: '
            '"Never", "OnFailure"',
            "spec.mpiReplicaSpecs[Launcher].replicas: Invalid value: 2: must be 1",
            'spec.mpiReplicaSpecs[Worker].restartPolicy: Unsupported value: "Invalid": supported values: '
            '"Never", "OnFailure"',
            "spec.mpiReplicaSpecs[Worker].replicas: Invalid value: 0: must be greater than or equal to 1",
        ],
        id="invalid replica fields",
    ),
    pytest.param(
        mpijob("1-foo", **valid_intel()),
        [f'metadata.name: Invalid value: "1-foo": will not able to create pod and service with invalid DNS label '
         f'"1-foo-worker-0": {DNS1035}'],
        id="invalid mpiJob name",
    ),
]


@pytest.mark.parametrize(("job", "expected"), UPSTREAM_CASES)
def test_upstream_cases(job: MPIJob, expected: list[str]) -> None:
    assert [str(e) for e in validate_upstream(job)] == expected
    assert [str(e) for e in validate(job)] == expected, "the extra rules add nothing to upstream's cases"


def test_origin_and_types_match_upstream() -> None:
    job = mpijob(slotsPerWorker=-1, runPolicy={"cleanPodPolicy": "None", "backoffLimit": -2},
                 sshAuthMountPath="/x", mpiImplementation="OpenMPI",
                 mpiReplicaSpecs={"Launcher": {"replicas": 1, "restartPolicy": "Never", "template": C}})
    got = [(str(e.type), e.field, e.origin) for e in validate_upstream(job)]
    assert got == [
        ("FieldValueInvalid", "spec.slotsPerWorker", "minimum"),
        ("FieldValueInvalid", "spec.runPolicy.backoffLimit", "minimum"),
    ]


def valid_job(name: str = "foo", **overrides: Any) -> MPIJob:
    return mpijob(name, **valid_intel(**overrides))


EXTRA_CASES = [
    pytest.param(
        valid_job(launcherCreationPolicy="WhenReady"),
        ['spec.launcherCreationPolicy: Unsupported value: "WhenReady": supported values: "AtStartup", '
         '"WaitForWorkersReady"'],
        id="launcherCreationPolicy outside the enum",
    ),
    pytest.param(valid_job(launcherCreationPolicy="WaitForWorkersReady"), [], id="launcherCreationPolicy valid"),
    pytest.param(
        valid_job(mpiReplicaSpecs={**WITH_WORKER, "worker": {"replicas": 2}}),
        ['spec.mpiReplicaSpecs[worker]: Unsupported value: "worker": supported values: "Launcher", "Worker"; '
         'did you mean "Worker"? (replica types are case-sensitive)'],
        id="lowercase replica key with a hint",
    ),
    pytest.param(
        valid_job(mpiReplicaSpecs={**WITH_WORKER, "Workers": {"replicas": 2}}),
        ['spec.mpiReplicaSpecs[Workers]: Unsupported value: "Workers": supported values: "Launcher", "Worker"; '
         'did you mean "Worker"? (replica types are case-sensitive)'],
        id="plural replica key with a hint",
    ),
    pytest.param(
        valid_job(mpiReplicaSpecs={**WITH_WORKER, "PS": {"replicas": 2}}),
        ['spec.mpiReplicaSpecs[PS]: Unsupported value: "PS": supported values: "Launcher", "Worker"'],
        id="unknown replica key",
    ),
    pytest.param(
        valid_job("pi.v2"),
        [
            f'metadata.name: Invalid value: "pi.v2": will not able to create pod and service with invalid DNS '
            f'label "pi.v2-worker-0": {DNS1035}',
            'metadata.name: Invalid value: "pi.v2": must not contain dots: the headless Service "pi.v2" cannot be '
            f"created: {DNS1035}",
        ],
        id="dotted name names the Service that would fail",
    ),
]


@pytest.mark.parametrize(("job", "expected"), EXTRA_CASES)
def test_extra_rules(job: MPIJob, expected: list[str]) -> None:
    assert [str(e) for e in validate(job)] == expected


def test_managed_by_is_immutable() -> None:
    old = valid_job(runPolicy={"cleanPodPolicy": "None"})
    new = valid_job(runPolicy={"cleanPodPolicy": "None", "managedBy": "kueue.x-k8s.io/multikueue"})
    assert [str(e) for e in validate_update(old, new)] == [
        'spec.runPolicy.managedBy: Invalid value: "kueue.x-k8s.io/multikueue": field is immutable'
    ]
    assert validate_update(new, new) == []
    assert [str(e) for e in validate_update(new, old)] == [
        "spec.runPolicy.managedBy: Invalid value: null: field is immutable"
    ]


def test_invalid_status_is_rendered_like_the_api_server() -> None:
    errors = validate(valid_job(slotsPerWorker=None, mpiImplementation="X"))
    status = invalid_status("foo", errors)
    assert status == {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "message": 'MPIJob.kubeflow.org "foo" is invalid: [spec.slotsPerWorker: Required value: must have number of '
        'slots per worker, spec.mpiImplementation: Unsupported value: "X": supported values: "Intel", "MPICH", '
        '"OpenMPI"]',
        "reason": "Invalid",
        "details": {
            "name": "foo",
            "group": "kubeflow.org",
            "kind": "MPIJob",
            "causes": [
                {"reason": "FieldValueRequired", "message": "Required value: must have number of slots per worker",
                 "field": "spec.slotsPerWorker"},
                {"reason": "FieldValueNotSupported",
                 "message": 'Unsupported value: "X": supported values: "Intel", "MPICH", "OpenMPI"',
                 "field": "spec.mpiImplementation"},
            ],
        },
        "code": 422,
    }
    assert aggregate(errors[:1]) == "spec.slotsPerWorker: Required value: must have number of slots per worker"
