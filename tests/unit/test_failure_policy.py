"""Validation of v2's spec.runPolicy.failurePolicy and of its v2beta1 annotation (shared/api/
failure_policy_validation.py, v2_spec_annotation.py, version_validation.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.api import constants as c
from shared.api.failure_policy_validation import failure_policy_errors
from shared.api.types import MPIJob
from shared.api.v2_spec_annotation import annotation_errors, canonical_annotation
from shared.api.v2types import (
    FAILURE_POLICY_SCHEMA,
    FailurePolicy,
    MPIJobV2,
    with_failure_policy_defaults,
)
from shared.api.version_validation import failure_policy_update_errors, v2_errors, version_errors

ANNOTATION = c.V2_SPEC_ANNOTATION
EXIT_RULE = {"name": "bad", "action": "FailJob", "onExitCodes": {"operator": "In", "values": [2]}}
P = "spec.runPolicy.failurePolicy"

CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("valid", {"maxRestarts": 1, "rules": [EXIT_RULE, {"name": "d", "action": "RestartJob", "onReplicaTypes": [
        "Worker"], "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}, []),
    ("no rules", {"maxRestarts": 1}, [f"{P}.rules: Required value: must have at least one rule"]),
    ("negative maxRestarts", {"maxRestarts": -1, "rules": [EXIT_RULE]},
     [f"{P}.maxRestarts: Invalid value: -1: must be greater than or equal to 0"]),
    ("RestartJob without maxRestarts", {"rules": [{**EXIT_RULE, "action": "RestartJob"}]},
     [f"{P}.maxRestarts: Required value: maxRestarts is required with a RestartJob rule"]),
    ("bad action and names", {"rules": [{**EXIT_RULE, "action": "Restart"}, EXIT_RULE, {**EXIT_RULE, "name": "1a"},
                                        {**EXIT_RULE, "name": "a" * 64}]},
     [f'{P}.rules[0].action: Unsupported value: "Restart": supported values: "RestartJob", "FailJob"',
      f'{P}.rules[1].name: Duplicate value: "bad"',
      f"{P}.rules[2].name: Invalid value: \"1a\": must start with a letter and contain only letters, digits, '_', "
      "',' and ':', ending in neither",
      f"{P}.rules[3].name: Too long: may not be more than 63 bytes"]),
    ("both matchers", {"rules": [{**EXIT_RULE, "onPodConditions": [{"type": "a/"}]}]},
     [f"{P}.rules[0]: Invalid value: null: exactly one of onPodConditions and onExitCodes is required",
      f'{P}.rules[0].onPodConditions[0].type: Invalid value: "a/": must be a qualified name']),
    ("replica types", {"rules": [{**EXIT_RULE, "onReplicaTypes": ["worker", "Launcher", "Launcher"]}]},
     [f'{P}.rules[0].onReplicaTypes[0]: Unsupported value: "worker": supported values: "Launcher", "Worker"',
      f'{P}.rules[0].onReplicaTypes[2]: Duplicate value: "Launcher"']),
    ("exit codes", {"rules": [{"name": "x", "action": "FailJob", "onExitCodes": {
        "containerName": "Main", "operator": "In", "values": [3, 0, 3]}}]},
     [f'{P}.rules[0].onExitCodes.containerName: Invalid value: "Main": a lowercase RFC 1123 label must consist of '
      "lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. "
      "'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
      f"{P}.rules[0].onExitCodes.values[2]: Duplicate value: 3",
      f"{P}.rules[0].onExitCodes.values: Invalid value: [3,0,3]: values must be sorted ascending",
      f"{P}.rules[0].onExitCodes.values: Invalid value: [3,0,3]: 0 is not allowed with the In operator"]),
    ("condition status", {"rules": [{"name": "x", "action": "FailJob", "onPodConditions": [
        {"type": "example.com/Gone", "status": "Yes"}]}]},
     [f'{P}.rules[0].onPodConditions[0].status: Unsupported value: "Yes": supported values: "True", "False", '
      '"Unknown"']),
    ("limits", {"maxRestarts": 2**31, "rules": [
        {"name": "codes", "action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": list(range(1, 257))}},
        {"name": "conditions", "action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}] * 21},
        *({**EXIT_RULE, "name": f"r{i}"} for i in range(19))]},
     [f"{P}.maxRestarts: Invalid value: 2147483648: must be less than or equal to 2147483647",
      f"{P}.rules: Too many: 21: must have at most 20 items",
      f"{P}.rules[0].onExitCodes.values: Too many: 256: must have at most 255 items",
      f"{P}.rules[1].onPodConditions: Too many: 21: must have at most 20 items"]),
]


@pytest.mark.parametrize(("policy", "expected"), [(p, e) for _, p, e in CASES], ids=[i for i, _, _ in CASES])
def test_failure_policy_errors(policy: dict[str, Any], expected: list[str]) -> None:
    assert [str(e) for e in failure_policy_errors(FailurePolicy.model_validate(policy))] == expected


def _job(annotations: dict[str, Any], run_policy: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": c.API_VERSION, "kind": "MPIJob", "metadata": {"name": "pi", "annotations": annotations},
            "spec": {"runPolicy": {} if run_policy is None else run_policy}}


def test_v2_denies_the_reserved_annotation() -> None:
    job = MPIJobV2.model_validate({**_job({ANNOTATION: "{}"}), "apiVersion": c.API_VERSION_V2})
    assert [str(e) for e in v2_errors(job)] == [
        f"metadata.annotations[{ANNOTATION}]: Forbidden: is reserved for storing v2 fields in kubeflow.org/v2beta1; "
        "set spec.runPolicy.failurePolicy instead"]


def test_the_annotation_is_validated_like_the_field() -> None:
    value = '{"spec":{"runPolicy":{"failurePolicy":{"rules":[]}}}}'
    assert [str(e) for e in annotation_errors(_job({ANNOTATION: value}))] == [
        f"metadata.annotations[{ANNOTATION}].{P}.rules: Required value: must have at least one rule"]
    shape = ('must be JSON of {"spec":{"runPolicy":{"failurePolicy":{...}}}} with only fields of kubeflow.org/v2, '
             "on an MPIJob with spec.runPolicy")
    assert [str(e) for e in annotation_errors(_job({ANNOTATION: "x"}))] == [
        f'metadata.annotations[{ANNOTATION}]: Invalid value: "x": {shape}']
    assert [str(e) for e in annotation_errors(_job({ANNOTATION: "y" * 81}))] == [
        f'metadata.annotations[{ANNOTATION}]: Invalid value: "<81 characters>": {shape}']


def test_a_valid_annotation_is_made_canonical() -> None:
    value = '{"spec": {"runPolicy": {"failurePolicy": {"rules": [{"onExitCodes": {"values": [2], "operator": "In"}, ' \
            '"name": "bad", "action": "FailJob"}]}}}}'
    assert canonical_annotation(_job({ANNOTATION: value})) == (
        '{"spec":{"runPolicy":{"failurePolicy":{"rules":[{"action":"FailJob","name":"bad",'
        '"onExitCodes":{"operator":"In","values":[2]}}]}}}}')
    assert canonical_annotation(_job({ANNOTATION: canonical_annotation(_job({ANNOTATION: value}))})) is None
    assert canonical_annotation(_job({ANNOTATION: "x"})) is None


DISRUPTED = {"name": "disrupted", "action": "RestartJob", "onPodConditions": [{"type": "DisruptionTarget"}]}
DEFAULTED = {**DISRUPTED, "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


def _v2(policy: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "pi", **({"labels": labels} if labels else {})}
    return {"apiVersion": c.API_VERSION_V2, "kind": "MPIJob", "metadata": metadata,
            "spec": {"runPolicy": {"failurePolicy": policy}}}


def test_v2_defaults_are_no_change_of_the_policy() -> None:
    """A policy stored without a pod condition's status, read through v2 (the stored object converted, without
    defaults) and written back with a label (the request object, with the schema's status "True")."""
    old = _v2({"maxRestarts": 2, "rules": [DISRUPTED]})
    new = _v2({"maxRestarts": 2, "rules": [DEFAULTED]}, labels={"team": "a"})
    assert version_errors(MPIJobV2.model_validate(new), new, old) == []


def test_a_changed_policy_is_still_immutable() -> None:
    old = _v2({"maxRestarts": 2, "rules": [DISRUPTED]})
    changed = [{**DISRUPTED, "onPodConditions": [{"type": "DisruptionTarget", "status": "False"}]}]
    for policy in ({"maxRestarts": 3, "rules": [DEFAULTED]}, {"maxRestarts": 2, "rules": changed}):
        new = _v2(policy)
        assert [e.field for e in version_errors(MPIJobV2.model_validate(new), new, old)] == [P]
    assert failure_policy_update_errors(None, {"rules": [DEFAULTED]}) != []
    assert failure_policy_update_errors({"rules": [DISRUPTED]}, None) != []


def test_the_policy_json_types_are_the_schemas() -> None:
    """The JSON types the annotation's lift checks, read from the failurePolicy's schema, are those it checked when
    they were written by hand (tests/unit/test_crd.py checks the rest of that schema in the CRD)."""
    def json_types(node: dict[str, Any]) -> Any:
        if node["type"] == "array":
            return [json_types(node["items"])]
        if node["type"] == "object":
            return {key: json_types(sub) for key, sub in node["properties"].items()}
        return node["type"]

    rule = {"name": "string", "action": "string", "onReplicaTypes": ["string"],
            "onPodConditions": [{"type": "string", "status": "string"}],
            "onExitCodes": {"containerName": "string", "operator": "string", "values": ["integer"]}}
    assert json_types(FAILURE_POLICY_SCHEMA) == {"maxRestarts": "integer", "rules": [rule]}


def test_with_failure_policy_defaults() -> None:
    b_rule = {**DISRUPTED, "name": "b", "onPodConditions": [{"type": "A", "status": "False"}, {"type": "B"}]}
    policy: dict[str, Any] = {"maxRestarts": 1, "rules": [EXIT_RULE, DISRUPTED, b_rule]}
    assert with_failure_policy_defaults(policy) == {"maxRestarts": 1, "rules": [EXIT_RULE, DEFAULTED, {
        **b_rule, "onPodConditions": [{"type": "A", "status": "False"}, {"type": "B", "status": "True"}]}]}
    assert policy["rules"][1] == DISRUPTED  # a copy: the argument is left as it was
    null_status = {"rules": [{**DISRUPTED, "onPodConditions": [{"type": "DisruptionTarget", "status": None}]}]}
    assert with_failure_policy_defaults(null_status) == {"rules": [DEFAULTED]}  # null is absent, as when pruned
    assert with_failure_policy_defaults({"rules": "x"}) == {"rules": "x"}  # not a policy: left alone


def _annotation(*rules: dict[str, Any]) -> str:
    value = {"spec": {"runPolicy": {"failurePolicy": {"maxRestarts": 2, "rules": list(rules)}}}}
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def test_the_annotation_is_stored_with_the_v2_defaults() -> None:
    """The mutating webhook stores what a v2 client reads and writes back, so a v2 update never differs from it."""
    assert canonical_annotation(_job({ANNOTATION: _annotation(DISRUPTED)})) == _annotation(DEFAULTED)
    assert canonical_annotation(_job({ANNOTATION: _annotation(DEFAULTED)})) is None


def test_making_a_stored_annotation_defaulted_is_no_change() -> None:
    """A v2beta1 update of a job stored without the defaults: the mutating webhook adds them, which is allowed."""
    old, new = _job({ANNOTATION: _annotation(DISRUPTED)}), _job({ANNOTATION: _annotation(DEFAULTED)})
    assert version_errors(MPIJob.model_validate(new), new, old) == []
    other = _job({ANNOTATION: _annotation({**DISRUPTED, "action": "FailJob"})})
    assert [e.field for e in version_errors(MPIJob.model_validate(other), other, old)] == [
        f"metadata.annotations[{ANNOTATION}]"]
