"""kubeflow.org/v2 <-> v2beta1 conversion (shared/api/conversion.py, v2_spec_annotation.py): fixed cases, upstream's
examples and round trips of generated objects (docs/proposals/v2.md, "Conversion")."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from shared.api import constants as c
from shared.api.conversion import ConversionError, convert, to_v2, to_v2beta1
from shared.api.v2_spec_annotation import canonical_json, lifted_failure_policy
from shared.api.v2types import with_failure_policy_defaults
from shared.api.worker_backend import WORKER_BACKEND_ANNOTATION
from tests.reference import example_params, load_example
from tests.unit.v2_strategies import v2_jobs, v2beta1_jobs

ANNOTATION = c.V2_SPEC_ANNOTATION
ROUND_TRIPS = 10_000
PROPERTY_SETTINGS = settings(max_examples=ROUND_TRIPS, deadline=None, suppress_health_check=[HealthCheck.too_slow])

POLICY = {"maxRestarts": 3, "rules": [
    {"name": "badArguments", "action": "FailJob", "onReplicaTypes": ["Launcher"],
     "onExitCodes": {"operator": "In", "values": [2]}},
    {"name": "disrupted", "action": "RestartJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    {"name": "workerStopped", "action": "RestartJob", "onReplicaTypes": ["Worker"],
     "onExitCodes": {"operator": "NotIn", "values": [0]}},
]}
# The annotation of the proposal's example, byte for byte.
PROPOSAL_ANNOTATION = (
    '{"spec":{"runPolicy":{"failurePolicy":{"maxRestarts":3,"rules":[{"action":"FailJob","name":"badArguments",'
    '"onExitCodes":{"operator":"In","values":[2]},"onReplicaTypes":["Launcher"]},{"action":"RestartJob",'
    '"name":"disrupted","onPodConditions":[{"status":"True","type":"DisruptionTarget"}]},{"action":"RestartJob",'
    '"name":"workerStopped","onExitCodes":{"operator":"NotIn","values":[0]},"onReplicaTypes":["Worker"]}]}}}}'
)
LAUNCHER = {"replicas": 1, "template": {"spec": {"containers": [{"name": "launcher", "image": "mpi-pi"}]}}}


def _job(api_version: str, run_policy: dict[str, Any] | None, annotations: dict[str, Any] | None = None,
         status: dict[str, Any] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "pi", "namespace": "default", "uid": "u-1", "resourceVersion": "7"}
    if annotations is not None:
        metadata["annotations"] = annotations
    spec: dict[str, Any] = {"slotsPerWorker": 1, "mpiReplicaSpecs": {"Launcher": LAUNCHER}}
    if run_policy is not None:
        spec["runPolicy"] = run_policy
    job = {"apiVersion": api_version, "kind": "MPIJob", "metadata": metadata, "spec": spec}
    return {**job, "status": status} if status is not None else job


def test_the_proposals_example_is_stored_with_its_annotation() -> None:
    v2 = _job(c.API_VERSION_V2, {"cleanPodPolicy": "Running", "failurePolicy": POLICY}, {"team": "a"})
    stored = _job(c.API_VERSION, {"cleanPodPolicy": "Running"}, {"team": "a", ANNOTATION: PROPOSAL_ANNOTATION})
    assert to_v2beta1(v2) == stored
    assert to_v2(stored) == v2
    assert lifted_failure_policy(stored) == POLICY


def test_an_emptied_run_policy_stays_and_the_last_annotation_goes() -> None:
    v2 = _job(c.API_VERSION_V2, {"failurePolicy": {"rules": []}}, status={"restartCount": 1})
    stored = _job(c.API_VERSION, {}, {ANNOTATION: '{"spec":{"runPolicy":{"failurePolicy":{"rules":[]}}}}'},
                  status={"restartCount": 1})
    assert to_v2beta1(v2) == stored
    assert to_v2(stored) == v2


def test_a_v2_object_replaces_a_stale_annotation() -> None:
    """v2 -> v2beta1 writes the annotation from the field, whatever value was there (a v2 client cannot set it:
    the webhook denies the reserved annotation on v2 writes)."""
    v2 = _job(c.API_VERSION_V2, {"failurePolicy": POLICY}, {ANNOTATION: "stale"})
    assert to_v2beta1(v2) == _job(c.API_VERSION, {}, {ANNOTATION: PROPOSAL_ANNOTATION})


def test_without_a_failure_policy_only_the_api_version_changes() -> None:
    v2 = _job(c.API_VERSION_V2, {"cleanPodPolicy": "All", "failurePolicy": None}, {"x": "y"})
    assert to_v2beta1(v2) == {**v2, "apiVersion": c.API_VERSION}
    assert to_v2(to_v2beta1(v2)) == v2


NOT_LIFTABLE = {
    "indented": json.dumps({"spec": {"runPolicy": {"failurePolicy": POLICY}}}, indent=2),
    "keys not sorted": '{"spec":{"runPolicy":{"failurePolicy":{"rules":[],"maxRestarts":1}}}}',
    "another path too": '{"spec":{"runPolicy":{"failurePolicy":{}},"slotsPerWorker":2}}',
    "unknown field": '{"spec":{"runPolicy":{"failurePolicy":{"restartStrategy":"Recreate"}}}}',
    "a string for an integer": '{"spec":{"runPolicy":{"failurePolicy":{"maxRestarts":"3"}}}}',
    "a boolean for an integer": '{"spec":{"runPolicy":{"failurePolicy":{"maxRestarts":true}}}}',
    "a float for an integer": '{"spec":{"runPolicy":{"failurePolicy":{"maxRestarts":3.0}}}}',
    "null": '{"spec":{"runPolicy":{"failurePolicy":null}}}',
    "an array": '{"spec":{"runPolicy":{"failurePolicy":[]}}}',
    "not JSON": "{spec: 1}",
    "empty": "",
    "nested too deep": "[" * 100_000 + "]" * 100_000,
    "too many digits": "1" * 5_000,
}


@pytest.mark.parametrize("value", NOT_LIFTABLE.values(), ids=NOT_LIFTABLE.keys())
def test_a_value_that_is_not_liftable_is_kept_verbatim(value: str) -> None:
    stored = _job(c.API_VERSION, {"cleanPodPolicy": "All"}, {ANNOTATION: value})
    assert to_v2(stored) == {**stored, "apiVersion": c.API_VERSION_V2}
    assert to_v2beta1(to_v2(stored)) == stored


@pytest.mark.parametrize("run_policy", [None, "All"], ids=["no runPolicy", "runPolicy not an object"])
def test_an_annotation_on_a_job_without_a_run_policy_object_is_kept_verbatim(run_policy: Any) -> None:
    stored = _job(c.API_VERSION, None, {ANNOTATION: PROPOSAL_ANNOTATION})
    if run_policy is not None:
        stored["spec"]["runPolicy"] = run_policy
    assert to_v2(stored) == {**stored, "apiVersion": c.API_VERSION_V2}


def test_same_version_is_the_object_itself() -> None:
    stored = _job(c.API_VERSION, {}, {ANNOTATION: PROPOSAL_ANNOTATION})
    assert convert(stored, c.API_VERSION) is stored


CANNOT_CONVERT = [
    ([], c.API_VERSION_V2, "not an object"),
    ({"apiVersion": c.API_VERSION, "kind": "TFJob"}, c.API_VERSION_V2, "kind 'TFJob' is not MPIJob"),
    ({"apiVersion": c.API_VERSION, "kind": {"a": "b"}}, c.API_VERSION_V2, "kind an object is not MPIJob"),
    ({"apiVersion": ["x"], "kind": "MPIJob"}, c.API_VERSION_V2,
     "unsupported apiVersion an array: supported are kubeflow.org/v2beta1, kubeflow.org/v2"),
    ({"apiVersion": "kubeflow.org/v1", "kind": "MPIJob"}, c.API_VERSION_V2,
     "unsupported apiVersion 'kubeflow.org/v1': supported are kubeflow.org/v2beta1, kubeflow.org/v2"),
    ({"apiVersion": c.API_VERSION, "kind": "MPIJob"}, "kubeflow.org/v3",
     "unsupported desiredAPIVersion 'kubeflow.org/v3': supported are kubeflow.org/v2beta1, kubeflow.org/v2"),
    ({"apiVersion": c.API_VERSION, "kind": "MPIJob", "metadata": []}, c.API_VERSION_V2, "metadata is not an object"),
    ({"apiVersion": c.API_VERSION_V2, "kind": "MPIJob", "metadata": {"annotations": "x"},
      "spec": {"runPolicy": {"failurePolicy": {}}}}, c.API_VERSION, "metadata.annotations is not an object"),
]


@pytest.mark.parametrize(("obj", "desired", "message"), CANNOT_CONVERT, ids=[m for _, _, m in CANNOT_CONVERT])
def test_what_cannot_be_converted(obj: Any, desired: str, message: str) -> None:
    with pytest.raises(ConversionError) as raised:
        convert(obj, desired)
    assert str(raised.value) == message


@pytest.mark.parametrize("path", example_params())
def test_upstream_examples_convert_by_their_api_version_only(path: Path) -> None:
    example = load_example(path)
    as_v2 = convert(copy.deepcopy(example), c.API_VERSION_V2)
    assert as_v2 == {**example, "apiVersion": c.API_VERSION_V2}
    assert convert(as_v2, c.API_VERSION) == example


def _only_annotation_differs(a: dict[str, Any], b: dict[str, Any]) -> None:
    """metadata is the same but for the two annotations (the API server rejects other changes)."""
    strip = [{**m, "annotations": {k: v for k, v in m.get("annotations", {}).items()
                                   if k not in (ANNOTATION, WORKER_BACKEND_ANNOTATION)}}
             for m in (a["metadata"], b["metadata"])]
    for m in strip:
        if not m["annotations"]:
            del m["annotations"]
    assert strip[0] == strip[1]


def _stored_with_defaults(job: dict[str, Any]) -> dict[str, Any]:
    """A v2beta1 job whose liftable annotation has the v2 defaults added: the mutating webhook's stored form."""
    policy = lifted_failure_policy(job)
    if policy is None:
        return job
    value = canonical_json({"spec": {"runPolicy": {"failurePolicy": with_failure_policy_defaults(policy)}}})
    metadata = {**job["metadata"], "annotations": {**job["metadata"]["annotations"], ANNOTATION: value}}
    return {**job, "metadata": metadata}


def _v2_with_defaults(job: dict[str, Any]) -> dict[str, Any]:
    """A v2 job with the defaults the API server gives its failurePolicy."""
    run_policy = job.get("spec", {}).get("runPolicy")
    if not isinstance(run_policy, dict) or not isinstance(run_policy.get("failurePolicy"), dict):
        return job
    policy = with_failure_policy_defaults(run_policy["failurePolicy"])
    return {**job, "spec": {**job["spec"], "runPolicy": {**run_policy, "failurePolicy": policy}}}


@PROPERTY_SETTINGS
@given(v2beta1_jobs())
def test_v2beta1_round_trip(job: dict[str, Any]) -> None:
    """Byte for byte for a job stored with its policy's defaults; else the only change is the defaults added."""
    original = copy.deepcopy(job)
    as_v2 = convert(job, c.API_VERSION_V2)
    assert as_v2["apiVersion"] == c.API_VERSION_V2
    _only_annotation_differs(as_v2, job)
    assert convert(as_v2, c.API_VERSION) == _stored_with_defaults(original)
    stored = _stored_with_defaults(original)
    assert convert(convert(copy.deepcopy(stored), c.API_VERSION_V2), c.API_VERSION) == stored
    assert job == original  # the input is never modified


@PROPERTY_SETTINGS
@given(v2_jobs())
def test_v2_round_trip(job: dict[str, Any]) -> None:
    original = copy.deepcopy(job)
    stored = convert(job, c.API_VERSION)
    assert stored["apiVersion"] == c.API_VERSION
    _only_annotation_differs(stored, job)
    assert "failurePolicy" not in stored.get("spec", {}).get("runPolicy", {})
    assert "workerBackend" not in stored.get("spec", {})
    backend = original.get("spec", {}).get("workerBackend")
    assert stored["metadata"].get("annotations", {}).get(WORKER_BACKEND_ANNOTATION) == backend
    assert convert(stored, c.API_VERSION_V2) == _v2_with_defaults(original)
    assert job == original


def test_a_policy_stored_without_its_defaults_is_lifted_with_them() -> None:
    """What the API server gives a v2 request, so that its rule "the policy is unchanged" holds on a label."""
    without = json.loads(PROPOSAL_ANNOTATION.replace('{"status":"True","type":"DisruptionTarget"}',
                                                     '{"type":"DisruptionTarget"}'))
    stored = _job(c.API_VERSION, {"suspend": True}, {ANNOTATION: canonical_json(without), "team": "a"})
    assert to_v2(stored) == _job(c.API_VERSION_V2, {"suspend": True, "failurePolicy": POLICY}, {"team": "a"})
    assert to_v2beta1(to_v2(stored)) == _job(c.API_VERSION, {"suspend": True},
                                             {"team": "a", ANNOTATION: PROPOSAL_ANNOTATION})


BACKEND_CASES = [  # (v2 spec's workerBackend, v2beta1 annotation), both ways
    ("IndexedJob", "IndexedJob"),
    ("Pods", "Pods"),
]


@pytest.mark.parametrize(("backend", "annotation"), BACKEND_CASES, ids=[b for b, _ in BACKEND_CASES])
def test_the_worker_backend_moves_between_the_field_and_the_annotation(backend: str, annotation: str) -> None:
    v2 = _job(c.API_VERSION_V2, {"cleanPodPolicy": "Running"}, {"team": "a"})
    v2["spec"]["workerBackend"] = backend
    stored = _job(c.API_VERSION, {"cleanPodPolicy": "Running"}, {"team": "a", WORKER_BACKEND_ANNOTATION: annotation})
    assert to_v2beta1(v2) == stored
    assert to_v2(stored) == v2


def test_both_fields_move_and_the_emptied_annotations_go() -> None:
    v2 = _job(c.API_VERSION_V2, {"failurePolicy": POLICY})
    v2["spec"]["workerBackend"] = "IndexedJob"
    stored = _job(c.API_VERSION, {}, {ANNOTATION: PROPOSAL_ANNOTATION, WORKER_BACKEND_ANNOTATION: "IndexedJob"})
    assert to_v2beta1(v2) == stored
    assert to_v2(stored) == v2


@pytest.mark.parametrize("value", ["", "indexedjob", "Pods ", "JobSet", 3], ids=repr)
def test_a_worker_backend_annotation_that_names_no_backend_is_kept_verbatim(value: Any) -> None:
    """The v2 schema's enum would refuse it as the field; the validating webhook refuses it on a new object."""
    stored = _job(c.API_VERSION, {}, {WORKER_BACKEND_ANNOTATION: value})
    assert to_v2(stored) == {**stored, "apiVersion": c.API_VERSION_V2}
    assert to_v2beta1(to_v2(stored)) == stored


def test_a_worker_backend_annotation_is_lifted_only_into_a_spec_object() -> None:
    stored = {"apiVersion": c.API_VERSION, "kind": "MPIJob",
              "metadata": {"name": "pi", "annotations": {WORKER_BACKEND_ANNOTATION: "IndexedJob"}}}
    assert to_v2(stored) == {**stored, "apiVersion": c.API_VERSION_V2}


@pytest.mark.parametrize("value", [None, 1, {"name": "IndexedJob"}], ids=repr)
def test_a_v2_worker_backend_that_is_not_a_string_stays_in_spec(value: Any) -> None:
    """A null the API server prunes, or a value its v2 schema refuses: nothing to keep in an annotation."""
    v2 = _job(c.API_VERSION_V2, None, {"team": "a"})
    v2["spec"]["workerBackend"] = value
    assert to_v2beta1(v2) == {**v2, "apiVersion": c.API_VERSION}
