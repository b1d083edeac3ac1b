"""docs/api-reference.md is the generator's output, and the models behind it agree with the CRD."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterator
from typing import Any

import pytest

from hack.gen.api_reference import DEFAULT_OUTPUT, generate, load_schema
from hack.gen.apiref.probes import Facts, collect
from hack.gen.apiref.shapes import EMBEDDED, Schema, mismatches, type_docs

Path_ = tuple[str, ...]

# Enums the CRD leaves out, as upstream's does (docs/crd.md): the webhook enforces the first four, the
# controller writes the condition types.
ENUMS_NOT_IN_CRD = {
    ("spec", "launcherCreationPolicy"),
    ("spec", "runPolicy", "cleanPodPolicy"),
    ("spec", "runPolicy", "managedBy"),
    ("spec", "mpiReplicaSpecs", "{}", "restartPolicy"),
    ("status", "conditions", "[]", "type"),
}


@pytest.fixture(scope="module")
def schema() -> Schema:
    return load_schema()


@pytest.fixture(scope="module")
def facts() -> dict[Path_, Facts]:
    return collect(type_docs())


def crd_nodes(node: Schema, path: Path_ = ()) -> Iterator[tuple[Path_, Schema]]:
    """Every node the CRD declares for MPIJob-owned fields, down to the core types it embeds."""
    yield path, node
    if path in EMBEDDED:
        return
    for name, sub in node.get("properties", {}).items():
        yield from crd_nodes(sub, (*path, name))
    if isinstance(node.get("additionalProperties"), dict):
        yield from crd_nodes(node["additionalProperties"], (*path, "{}"))
    if isinstance(node.get("items"), dict):
        yield from crd_nodes(node["items"], (*path, "[]"))


def enum_mismatches(schema: Schema, facts: dict[Path_, Facts]) -> list[str]:
    problems = []
    declared = {path: node["enum"] for path, node in crd_nodes(schema) if "enum" in node}
    for path, enum in declared.items():
        ours = facts.get(path, Facts()).values
        if set(ours) != set(enum):
            problems.append(f"{'.'.join(path)}: the CRD's enum is {enum}, the webhook's values {list(ours)}")
    for path, entry in facts.items():
        if entry.values and path not in declared and path not in ENUMS_NOT_IN_CRD:
            problems.append(f"{'.'.join(path)}: values {list(entry.values)} but no enum in the CRD")
    return problems


def default_mismatches(schema: Schema, facts: dict[Path_, Facts]) -> list[str]:
    problems = []
    for path, node in crd_nodes(schema):
        if "default" in node and facts.get(path, Facts()).defaults.get("") != node["default"]:
            ours = facts.get(path, Facts()).defaults
            problems.append(f"{'.'.join(path)}: the CRD defaults to {node['default']!r}, we to {ours}")
    return problems


def test_committed_reference_is_current(schema: Schema) -> None:
    expected = generate(schema)
    current = DEFAULT_OUTPUT.read_text(encoding="utf-8") if DEFAULT_OUTPUT.exists() else ""
    diff = "".join(difflib.unified_diff(current.splitlines(True), expected.splitlines(True),
                                        "docs/api-reference.md", "generated"))
    assert not diff, f"docs/api-reference.md is out of date: run `make api-reference`\n{diff}"


def test_models_match_the_crd(schema: Schema) -> None:
    assert mismatches(schema) == []


def test_every_crd_node_is_covered_by_a_model_field(schema: Schema) -> None:
    """The walk the comparison relies on reaches every CRD property path, so none goes unchecked."""
    fields = {f.path for doc in type_docs() for f in doc.fields}
    declared = {path for path, _ in crd_nodes(schema) if path and path[-1] not in ("{}", "[]")}
    assert declared - fields == set()
    assert fields - declared == set()
    assert ("spec", "mpiReplicaSpecs", "{}", "template") in declared  # the walk stops at the core types


def test_enums_match_the_crd(schema: Schema, facts: dict[Path_, Facts]) -> None:
    assert enum_mismatches(schema, facts) == []
    assert set(facts[("spec", "mpiImplementation")].values) == {"OpenMPI", "Intel", "MPICH"}


def test_defaults_match_the_crd(schema: Schema, facts: dict[Path_, Facts]) -> None:
    assert default_mismatches(schema, facts) == []
    assert facts[("spec", "mpiReplicaSpecs", "{}", "replicas")].defaults == {"Launcher": 1, "Worker": 0}


def _node(schema: Schema, *path: str) -> Schema:
    node = schema
    for step in path:
        node = node["additionalProperties"] if step == "{}" else node["items"] if step == "[]" else \
            node["properties"][step]
    return node


def _tampered(schema: Schema, change: Any) -> Schema:
    broken = copy.deepcopy(schema)
    change(broken)
    return broken


@pytest.mark.parametrize(("change", "expected"), [
    pytest.param(lambda s: _node(s, "spec")["properties"].update(fooBar={"type": "string"}),
                 "spec.fooBar: in the CRD, not in the model MPIJobSpec", id="crd-field-missing-in-model"),
    pytest.param(lambda s: _node(s, "status")["properties"].pop("startTime"),
                 "status.startTime: in the model JobStatus, not in the CRD", id="model-field-missing-in-crd"),
    pytest.param(lambda s: _node(s, "spec", "runPolicy", "backoffLimit").update(type="string"),
                 "spec.runPolicy.backoffLimit: the model says integer, the CRD string", id="type"),
    pytest.param(lambda s: _node(s, "status", "replicaStatuses", "{}")["properties"].update(ready={"type": "integer"}),
                 "status.replicaStatuses.{}.ready: in the CRD, not in the model ReplicaStatus", id="map-values"),
    pytest.param(lambda s: _node(s, "status", "conditions").update(type="object"),
                 "status.conditions: the model says array, the CRD object", id="list"),
    pytest.param(lambda s: _node(s, "spec", "runPolicy", "schedulingPolicy", "minResources", "{}").pop(
        "x-kubernetes-int-or-string"), "minResources.{}: the model says integer or string", id="int-or-string"),
    pytest.param(lambda s: _node(s, "spec", "mpiReplicaSpecs", "{}", "template").update(type="string"),
                 "spec.mpiReplicaSpecs.{}.template: the model says embedded, the CRD string", id="core-type"),
])
def test_a_real_mismatch_fails(schema: Schema, change: Any, expected: str) -> None:
    problems = mismatches(_tampered(schema, change))
    assert any(expected in p for p in problems), problems
    with pytest.raises(ValueError, match="disagree"):
        generate(_tampered(schema, change))


def test_an_enum_or_default_mismatch_fails(schema: Schema, facts: dict[Path_, Facts]) -> None:
    def enum(s: Schema) -> None:
        _node(s, "spec", "mpiImplementation")["enum"].append("Cray")

    def new_enum(s: Schema) -> None:
        _node(s, "spec", "runPolicy", "schedulingPolicy", "queue")["enum"] = ["default"]

    def default(s: Schema) -> None:
        _node(s, "spec", "slotsPerWorker")["default"] = 2

    assert enum_mismatches(_tampered(schema, enum), facts) == [
        "spec.mpiImplementation: the CRD's enum is ['OpenMPI', 'Intel', 'MPICH', 'Cray'], the webhook's values "
        "['Intel', 'MPICH', 'OpenMPI']"]
    assert enum_mismatches(_tampered(schema, new_enum), facts) == [
        "spec.runPolicy.schedulingPolicy.queue: the CRD's enum is ['default'], the webhook's values []"]
    assert default_mismatches(_tampered(schema, default), facts) == [
        "spec.slotsPerWorker: the CRD defaults to 2, we to {'': 1}"]



def test_the_v2_section_checks_the_v2_models_against_the_v2_schema(schema: Schema) -> None:
    v2 = load_schema(version="v2")

    def extra_rule_field(s: Schema) -> None:
        _node(s, "spec", "runPolicy", "failurePolicy", "rules", "[]")["properties"].update(
            onNodeLost={"type": "boolean"})

    with pytest.raises(ValueError, match=r"v2: spec\.runPolicy\.failurePolicy\.rules\.\[\]\.onNodeLost: in the CRD, "
                                         "not in the model FailurePolicyRule"):
        generate(schema, _tampered(v2, extra_rule_field))
    page = generate(schema, v2)
    # the 8 types of v2beta1, then MPIJobSpec and RunPolicy as v2 has them and the 4 it adds
    assert page.count("\n## ") == 14
    assert "## FailurePolicyRule (v2)" in page
    assert "| `workerBackend` | string |  | How the workers run." in page
