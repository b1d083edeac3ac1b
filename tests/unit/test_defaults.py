"""Defaulting: upstream's TestSetDefaults_MPIJob cases (spec/api.md 7.1) plus the CRD defaults, and the patch."""

from __future__ import annotations

import base64
import copy
import itertools
from typing import Any

import jsonpatch
import orjson
import pytest

from shared.api import MPIJob, defaulted_dict, defaults_patch
from shared.api.defaults import missing_defaults
from tests.unit.helpers import wire
from webhook import admission

BASE_DEFAULTS: dict[str, Any] = {
    "slotsPerWorker": 1,
    "runLauncherAsWorker": False,  # CRD default
    "sshAuthMountPath": "/root/.ssh",
    "launcherCreationPolicy": "AtStartup",
    "mpiImplementation": "OpenMPI",
    "runPolicy": {"cleanPodPolicy": "None", "suspend": False},  # suspend: CRD default
}

OVERRIDDEN: dict[str, Any] = {
    "slotsPerWorker": 10,
    "runLauncherAsWorker": False,
    "sshAuthMountPath": "/home/mpiuser/.ssh",
    "launcherCreationPolicy": "AtStartup",
    "runPolicy": {
        "cleanPodPolicy": "Running",
        "ttlSecondsAfterFinished": 2,
        "activeDeadlineSeconds": 3,
        "backoffLimit": 4,
        "suspend": False,
    },
}


def job(spec: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "foo"}}
    if spec is not None:
        out["spec"] = spec
    return out


CASES = [
    pytest.param(job(None), job(BASE_DEFAULTS), id="base defaults"),
    pytest.param(job({}), job(BASE_DEFAULTS), id="base defaults, empty spec"),
    pytest.param(
        job({**OVERRIDDEN, "mpiImplementation": "Intel"}),
        job({**OVERRIDDEN, "mpiImplementation": "Intel"}),
        id="base defaults overridden (intel)",
    ),
    pytest.param(
        job({**OVERRIDDEN, "mpiImplementation": "MPICH"}),
        job({**OVERRIDDEN, "mpiImplementation": "MPICH"}),
        id="base defaults overridden (mpich)",
    ),
    pytest.param(
        job({"mpiReplicaSpecs": {"Launcher": {}}}),
        job({**BASE_DEFAULTS, "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "restartPolicy": "OnFailure"}}}),
        id="launcher defaults",
    ),
    pytest.param(
        job({"mpiReplicaSpecs": {"Worker": {}}}),
        job({**BASE_DEFAULTS, "mpiReplicaSpecs": {"Worker": {"replicas": 0, "restartPolicy": "Never"}}}),
        id="worker defaults",
    ),
    pytest.param(
        job({"runPolicy": {"suspend": True, "managedBy": "kueue.x-k8s.io/multikueue"}, "slotsPerWorker": None}),
        job({**BASE_DEFAULTS, "runPolicy": {"suspend": True, "managedBy": "kueue.x-k8s.io/multikueue",
                                            "cleanPodPolicy": "None"}}),
        id="set values are kept and nulls count as unset",
    ),
]


def test_unknown_fields_survive_defaulting() -> None:
    given = job({"mpiReplicaSpecs": {"Launcher": {"futureField": [1, 2]}}, "futureSpecField": {"a": "b"}})
    given["futureTop"] = True
    out = wire(MPIJob.model_validate(defaulted_dict(given)))
    assert out["futureTop"] is True
    assert out["spec"]["futureSpecField"] == {"a": "b"}
    assert out["spec"]["mpiReplicaSpecs"]["Launcher"]["futureField"] == [1, 2]


PATCH_CASES = [
    pytest.param(
        job(None),
        [{"op": "add", "path": "/spec", "value": {
            "slotsPerWorker": 1, "runLauncherAsWorker": False, "sshAuthMountPath": "/root/.ssh",
            "launcherCreationPolicy": "AtStartup", "mpiImplementation": "OpenMPI",
            "runPolicy": {"cleanPodPolicy": "None"}}}],
        id="no spec: one op adds the whole defaulted spec",
    ),
    pytest.param(
        job({"runPolicy": {"suspend": True}, "mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": None}}),
        [
            {"op": "add", "path": "/spec/slotsPerWorker", "value": 1},
            {"op": "add", "path": "/spec/runLauncherAsWorker", "value": False},
            {"op": "add", "path": "/spec/sshAuthMountPath", "value": "/root/.ssh"},
            {"op": "add", "path": "/spec/launcherCreationPolicy", "value": "AtStartup"},
            {"op": "add", "path": "/spec/mpiImplementation", "value": "OpenMPI"},
            {"op": "add", "path": "/spec/runPolicy/cleanPodPolicy", "value": "None"},
            {"op": "add", "path": "/spec/mpiReplicaSpecs/Launcher/restartPolicy", "value": "OnFailure"},
            {"op": "add", "path": "/spec/mpiReplicaSpecs/Worker", "value": {"replicas": 0, "restartPolicy": "Never"}},
        ],
        id="only unset fields; suspend is never touched",
    ),
    pytest.param(
        job({**OVERRIDDEN, "mpiImplementation": "Intel", "runPolicy": {"cleanPodPolicy": "All"},
             "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "restartPolicy": "Never"}}}),
        [],
        id="fully specified: no ops (suspend is left to the API server's CRD default)",
    ),
    pytest.param(job({"runPolicy": {}}), [
        {"op": "add", "path": "/spec/slotsPerWorker", "value": 1},
        {"op": "add", "path": "/spec/runLauncherAsWorker", "value": False},
        {"op": "add", "path": "/spec/sshAuthMountPath", "value": "/root/.ssh"},
        {"op": "add", "path": "/spec/launcherCreationPolicy", "value": "AtStartup"},
        {"op": "add", "path": "/spec/mpiImplementation", "value": "OpenMPI"},
        {"op": "add", "path": "/spec/runPolicy/cleanPodPolicy", "value": "None"},
    ], id="empty runPolicy gets a field op"),
    pytest.param(job("not an object"), [], id="spec of the wrong type: no ops (validation reports it)"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("given", "expected"), PATCH_CASES)
def test_defaults_patch(given: dict[str, Any], expected: list[dict[str, Any]]) -> None:
    assert defaults_patch(given) == expected


@pytest.mark.parametrize(("given", "expected"), CASES)
def test_patch_agrees_with_defaulted_dict(given: dict[str, Any], expected: dict[str, Any]) -> None:
    """Applying the patch, then the API server's CRD default for suspend, gives defaulted_dict's result."""
    patched = jsonpatch.apply_patch(given, defaults_patch(given))
    patched["spec"]["runPolicy"].setdefault("suspend", False)
    assert patched == expected
    assert defaults_patch(patched) == [], "defaulting must be idempotent (reinvocationPolicy: IfNeeded)"


@pytest.mark.parametrize(("given", "expected"), CASES)
def test_defaulted_dict_agrees_and_leaves_its_input_alone(given: dict[str, Any], expected: dict[str, Any]) -> None:
    before = copy.deepcopy(given)
    assert wire(MPIJob.model_validate(defaulted_dict(given))) == expected
    assert given == before


def test_defaulted_dict_shares_unchanged_templates() -> None:
    template = {"spec": {"containers": [{"name": "c"}]}}
    given = job({"mpiReplicaSpecs": {"Launcher": {"template": template}}})
    out = defaulted_dict(given)
    assert out["spec"]["mpiReplicaSpecs"]["Launcher"]["template"] is template
    assert out["spec"]["mpiReplicaSpecs"]["Launcher"] is not given["spec"]["mpiReplicaSpecs"]["Launcher"]


def shapes() -> list[dict[str, Any]]:
    """MPIJobs with every combination of unset, null, empty, set and wrong-typed parents and fields."""
    parents: list[Any] = ["unset", None, {}, {"restartPolicy": "Always"}, {"replicas": 2, "restartPolicy": None}, 7]
    found: list[dict[str, Any]] = [{"metadata": {}}, {"metadata": {}, "spec": None}, {"metadata": {}, "spec": 3}]
    for run_policy, launcher, worker in itertools.product(parents, parents, parents):
        spec: dict[str, Any] = {"slotsPerWorker": 2, "mpiImplementation": None}
        if run_policy != "unset":
            spec["runPolicy"] = copy.deepcopy(run_policy)
        replica_specs = {role: copy.deepcopy(given) for role, given in (("Launcher", launcher), ("Worker", worker))
                         if given != "unset"}
        found.append({"metadata": {}, "spec": {**spec, "mpiReplicaSpecs": replica_specs}})
    return found


def test_each_missing_path_always_gets_the_same_value() -> None:
    values: dict[tuple[str, ...], list[Any]] = {}
    for obj in shapes():
        for crd_run_policy in (False, True):
            for path, value in missing_defaults(obj, crd_run_policy=crd_run_policy):
                values.setdefault((str(crd_run_policy), *path), []).append(value)
    assert len(values) > 10
    assert {path: seen for path, seen in values.items() if any(v != seen[0] for v in seen)} == {}


def test_the_mutate_answer_carries_the_patch_as_json_in_base64() -> None:
    for obj in shapes():
        answer = admission.mutate({"uid": "u", "operation": "CREATE", "object": obj})
        ops = defaults_patch(obj)
        encoded = answer.response.get("patch")
        assert (orjson.loads(base64.b64decode(encoded)) if encoded else [], answer.patch_ops) == (ops, len(ops))
        assert answer.outcome == ("patched" if ops else "allowed")
