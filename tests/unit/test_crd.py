"""Tests of the MPIJob CRD (deploy/crds/kubeflow.org_mpijobs.yaml) and its generator (hack/gen/crd.py)."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.reference import example_params

Schema = dict[str, Any]

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "hack" / "gen" / "crd.py"
CRD_FILE = ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
V2_PATCH_FILE = ROOT / "deploy" / "components" / "api-v2" / "crd-patch.yaml"  # kubeflow.org/v2, opt-in
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_crd", GENERATOR)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


@pytest.fixture(scope="module")
def crd() -> Schema:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the file is large: use libyaml if present
    loaded: Schema = yaml.load(CRD_FILE.read_text(encoding="utf-8"), Loader=loader)
    return loaded


def with_json_patch(obj: Schema, patch: list[Schema]) -> Schema:
    """OBJ with the `add` operations of PATCH applied (all the v2 patch holds), as kustomize applies them."""
    out = copy.deepcopy(obj)
    for op in patch:
        assert op["op"] == "add", op
        *parents, last = op["path"].strip("/").split("/")
        node: Any = out
        for step in parents:
            node = node[step]
        if last == "-":
            node.append(copy.deepcopy(op["value"]))
        else:
            node[last] = copy.deepcopy(op["value"])
    return out


@pytest.fixture(scope="module")
def v2_patch() -> list[Schema]:
    loaded: list[Schema] = yaml.load(V2_PATCH_FILE.read_text(encoding="utf-8"),
                                     Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return loaded


@pytest.fixture(scope="module")
def crd_v2(crd: Schema, v2_patch: list[Schema]) -> Schema:
    """The CRD with kubeflow.org/v2 on (deploy/crds-v2/ but for its labels)."""
    return with_json_patch(crd, v2_patch)


@pytest.fixture(scope="module")
def schema(crd: Schema) -> Schema:
    root: Schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return root


@pytest.fixture(scope="module")
def pod_spec(schema: Schema) -> Schema:
    replica = schema["properties"]["spec"]["properties"]["mpiReplicaSpecs"]["additionalProperties"]
    node: Schema = replica["properties"]["template"]["properties"]["spec"]
    return node


def _nodes(node: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    """Every schema node below `node` (properties, items, additionalProperties, anyOf), with its path."""
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from _nodes(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}{{}}")
    for i, sub in enumerate(node.get("anyOf", [])):
        yield from _nodes(sub, f"{path}<anyOf{i}>")


def _at(node: Schema, dotted: str) -> Schema:
    """The schema at a dotted path; `[]` steps into items, `{}` into additionalProperties."""
    for step in dotted.split("."):
        if step == "[]":
            node = node["items"]
        elif step == "{}":
            node = node["additionalProperties"]
        else:
            node = node["properties"][step]
    return node


# ---------------------------------------------------------------------------------------------
# (a) the committed file is what the generator produces


def test_committed_crd_is_generated_from_the_module() -> None:
    if shutil.which("go") is None:
        pytest.skip("the go command is not installed, so k8s.io/kubernetes cannot be located")
    try:
        source = gen.module_openapi_file(gen.K8S_VERSION)
    except gen.SourceError as exc:
        pytest.skip(f"k8s.io/kubernetes {gen.K8S_VERSION} cannot be downloaded: {exc}")
    schemas = gen.load_openapi_file(source)
    expected = gen.render(gen.build_crd(schemas), gen.K8S_VERSION)
    assert CRD_FILE.read_text(encoding="utf-8") == expected, "the CRD is out of date: run `make crd`"
    expected_patch = gen.render_v2_patch(gen.build_v2_patch(schemas), gen.K8S_VERSION)
    assert V2_PATCH_FILE.read_text(encoding="utf-8") == expected_patch, "the v2 patch is out of date: run `make crd`"
    assert with_json_patch(gen.build_crd(schemas), gen.build_v2_patch(schemas)) == gen.build_crd_with_v2(schemas)


def test_file_is_deterministic_and_marked_generated() -> None:
    text = CRD_FILE.read_text(encoding="utf-8")
    assert text.startswith("# Code generated by hack/gen/crd.py; DO NOT EDIT.")
    assert "v1.36.3" in text.splitlines()[2]
    assert text.splitlines()[1] == ("# The MPIJob CRD: kubeflow.org/v2beta1, served and stored, with no conversion "
                                    "webhook (kubeflow.org/v2 is opt-in: deploy/crds-v2/).")
    patch = V2_PATCH_FILE.read_text(encoding="utf-8")
    assert patch.startswith("# Code generated by hack/gen/crd.py; DO NOT EDIT.")
    assert "&id" not in patch
    assert "*id" not in patch
    assert "&id" not in text  # no YAML anchors or aliases
    assert "*id" not in text


# ---------------------------------------------------------------------------------------------
# (b) meaning of the committed CRD


def test_names_scope_and_version(crd: Schema, crd_v2: Schema) -> None:
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == "mpijobs.kubeflow.org"
    spec = crd["spec"]
    assert spec["group"] == "kubeflow.org"
    assert spec["scope"] == "Namespaced"
    assert spec["names"] == {
        "categories": ["kubeflow"], "kind": "MPIJob", "listKind": "MPIJobList", "plural": "mpijobs",
        "shortNames": ["mpij"], "singular": "mpijob",
    }
    [v2beta1] = spec["versions"]
    assert (v2beta1["name"], v2beta1["served"], v2beta1["storage"]) == ("v2beta1", True, True)
    assert crd_v2["spec"]["versions"][0] == v2beta1
    v2 = crd_v2["spec"]["versions"][1]
    assert (v2["name"], v2["served"], v2["storage"]) == ("v2", True, False)
    assert v2beta1["subresources"] == v2["subresources"] == {"status": {}}
    assert v2["additionalPrinterColumns"] == v2beta1["additionalPrinterColumns"]


def test_default_crd_has_no_conversion_webhook(crd: Schema) -> None:
    """Upstream's read path: no conversion (the API server's default, strategy None), nothing for cert-manager to
    inject, so reading, listing and deleting MPIJobs never calls a component of ours."""
    assert "conversion" not in crd["spec"]
    assert "annotations" not in crd["metadata"]


def test_v2_patch_adds_exactly_the_version_the_conversion_and_the_ca_injection(crd: Schema, crd_v2: Schema,
                                                                               v2_patch: list[Schema]) -> None:
    assert [(op["op"], op["path"]) for op in v2_patch] == [
        ("add", "/metadata/annotations"), ("add", "/spec/conversion"), ("add", "/spec/versions/-")]
    assert {k: v for k, v in crd_v2["spec"].items() if k not in ("conversion", "versions")} == {
        k: v for k, v in crd["spec"].items() if k != "versions"}


def test_v2_overlay_is_the_crd_with_the_component(crd_v2: Schema) -> None:
    """`kubectl kustomize deploy/crds-v2/` (deploy/crds/ plus deploy/components/api-v2): the CRD with v2 on, with the
    labels of deploy/crds/."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (for `kubectl kustomize`) is not on PATH")
    proc = subprocess.run([kubectl, "kustomize", str(ROOT / "deploy" / "crds-v2")], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    [built] = [d for d in yaml.load_all(proc.stdout, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]
    labels = yaml.safe_load((ROOT / "deploy" / "crds" / "kustomization.yaml").read_text())["labels"][0]["pairs"]
    assert built == {**crd_v2, "metadata": {**crd_v2["metadata"], "labels": labels}}


def test_conversion_goes_to_the_admission_webhooks_service(crd_v2: Schema) -> None:
    """With v2 on: same Service and CA as the admission webhooks: cert-manager injects the CA, or the built-in
    certificates' caBundle is patched in (deploy/certs/README.md)."""
    crd = crd_v2
    assert crd["spec"]["conversion"] == {"strategy": "Webhook", "webhook": {
        "clientConfig": {"service": {"name": "mpijob-webhook", "namespace": "mpi-operator", "path": "/convert",
                                     "port": 443}},
        "conversionReviewVersions": ["v1"]}}
    assert crd["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": "mpi-operator/mpijob-webhook"}
    service = yaml.safe_load((ROOT / "deploy" / "webhook" / "service.yaml").read_text())
    assert (service["metadata"]["name"], service["metadata"]["namespace"]) == ("mpijob-webhook", "mpi-operator")
    assert [p["port"] for p in service["spec"]["ports"]] == [443]


def test_printer_columns(crd: Schema) -> None:
    columns = {c["name"]: c for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert columns["State"]["jsonPath"] == ".status.conditions[-1:].type"
    assert columns["Age"] == {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"}
    assert columns["Workers"]["jsonPath"] == ".spec.mpiReplicaSpecs.Worker.replicas"
    assert columns["Workers"]["type"] == "integer"
    assert columns["Implementation"]["jsonPath"] == ".spec.mpiImplementation"
    assert columns["Implementation"]["priority"] == 1
    assert columns["Ready"] == {
        "description": "Ready workers out of the requested (kubectl describe shows why in the WorkersReady condition)",
        "jsonPath": ".status.readyWorkers", "name": "Ready", "type": "string"}
    assert columns["Workers-Reason"] == {
        "description": "Why workers are not ready (the WorkersReady condition's reason)",
        "jsonPath": '.status.conditions[?(@.type=="WorkersReady")].reason', "name": "Workers-Reason", "priority": 1,
        "type": "string"}
    assert columns["Restarts"] == {"description": "Restarts by the failurePolicy (kubeflow.org/v2)",
                                   "jsonPath": ".status.restartCount", "name": "Restarts", "type": "integer"}
    assert list(columns) == ["State", "Workers", "Ready", "Restarts", "Implementation", "Slots", "Workers-Reason",
                             "Age"]


@pytest.mark.parametrize(
    ("path", "default"),
    [
        ("spec.slotsPerWorker", 1),
        ("spec.runLauncherAsWorker", False),
        ("spec.sshAuthMountPath", "/root/.ssh"),
        ("spec.launcherCreationPolicy", "AtStartup"),
        ("spec.mpiImplementation", "OpenMPI"),
        ("spec.runPolicy.suspend", False),
    ],
)
def test_crd_defaults(schema: Schema, path: str, default: object) -> None:
    assert _at(schema, path)["default"] == default


def test_only_upstream_defaults_on_mpijob_fields(schema: Schema) -> None:
    defaulted = {
        path for path, node in _nodes(schema) if "default" in node and ".template." not in path
    }
    assert defaulted == {
        ".spec.slotsPerWorker", ".spec.runLauncherAsWorker", ".spec.sshAuthMountPath",
        ".spec.launcherCreationPolicy", ".spec.mpiImplementation", ".spec.runPolicy.suspend",
    }


def test_spec_enum_required_and_types(schema: Schema) -> None:
    spec = schema["properties"]["spec"]
    assert spec["required"] == ["mpiReplicaSpecs"]
    assert "required" not in schema
    assert spec["properties"]["mpiImplementation"]["enum"] == ["OpenMPI", "Intel", "MPICH"]
    assert "enum" not in spec["properties"]["launcherCreationPolicy"]  # upstream's marker typo: no enum
    assert "enum" not in _at(schema, "spec.runPolicy.cleanPodPolicy")
    replicas = spec["properties"]["mpiReplicaSpecs"]
    assert replicas["type"] == "object"
    assert set(replicas["additionalProperties"]["properties"]) == {"replicas", "restartPolicy", "template"}


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        ("spec.slotsPerWorker", "int32"),
        ("spec.runPolicy.ttlSecondsAfterFinished", "int32"),
        ("spec.runPolicy.activeDeadlineSeconds", "int64"),
        ("spec.runPolicy.backoffLimit", "int32"),
        ("spec.runPolicy.schedulingPolicy.minAvailable", "int32"),
        ("spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds", "int32"),
        ("spec.mpiReplicaSpecs.{}.replicas", "int32"),
        ("status.replicaStatuses.{}.active", "int32"),
        ("status.replicaStatuses.{}.succeeded", "int32"),
        ("status.replicaStatuses.{}.failed", "int32"),
        ("status.startTime", "date-time"),
        ("status.completionTime", "date-time"),
        ("status.lastReconcileTime", "date-time"),
        ("status.conditions.[].lastUpdateTime", "date-time"),
        ("status.conditions.[].lastTransitionTime", "date-time"),
    ],
)
def test_formats(schema: Schema, path: str, fmt: str) -> None:
    assert _at(schema, path)["format"] == fmt


def test_mpijob_fields_are_all_declared(schema: Schema) -> None:
    assert set(schema["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert set(_at(schema, "spec")["properties"]) == {
        "slotsPerWorker", "runLauncherAsWorker", "runPolicy", "mpiReplicaSpecs", "sshAuthMountPath",
        "launcherCreationPolicy", "mpiImplementation",
    }
    assert set(_at(schema, "spec.runPolicy")["properties"]) == {
        "cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit",
        "schedulingPolicy", "suspend", "managedBy",
    }
    assert set(_at(schema, "spec.runPolicy.schedulingPolicy")["properties"]) == {
        "minAvailable", "queue", "minResources", "priorityClass", "scheduleTimeoutSeconds",
    }
    assert set(_at(schema, "status")["properties"]) == {
        "conditions", "replicaStatuses", "startTime", "completionTime", "lastReconcileTime", "readyWorkers",
        "restartCount",
    }
    assert set(_at(schema, "status.replicaStatuses.{}")["properties"]) == {
        "active", "succeeded", "failed", "labelSelector", "selector",
    }


def test_min_resources_is_a_quantity_map(schema: Schema) -> None:
    values = _at(schema, "spec.runPolicy.schedulingPolicy.minResources")["additionalProperties"]
    assert values == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }


def test_status_conditions_and_selector(schema: Schema) -> None:
    conditions = _at(schema, "status.conditions")
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert sorted(conditions["items"]["required"]) == ["status", "type"]
    assert _at(schema, "status.conditions.[].status")["enum"] == ["True", "False", "Unknown"]
    assert "enum" not in _at(schema, "status.conditions.[].type")
    selector = _at(schema, "status.replicaStatuses.{}.labelSelector")
    assert selector["x-kubernetes-map-type"] == "atomic"
    assert set(selector["properties"]) == {"matchExpressions", "matchLabels"}


def test_every_mpijob_field_is_described(schema: Schema) -> None:
    undocumented = [
        path for path, node in _nodes(schema)
        if path and ".template" not in path and "<anyOf" not in path and not path.endswith("{}")
        and path != ".metadata" and not path.endswith("[]") and not node.get("description")
    ]
    assert undocumented == []


def test_fixed_upstream_doc_comments(schema: Schema) -> None:
    """api.md 1.3 lists upstream doc comments that contradict the code; ours must not repeat them."""
    assert _at(schema, "spec.runPolicy.cleanPodPolicy")["description"] == (
        "Which worker pods are deleted once the job has finished: Running (running and pending workers), All, or "
        "None (the default: every worker keeps running its sshd and holding its resources, GPUs included, until "
        "the MPIJob is deleted). Running suits most jobs.")
    replicas = _at(schema, "spec.mpiReplicaSpecs.{}.replicas")["description"]
    assert "defaults to 1" not in replicas
    assert "0" in replicas
    restart = _at(schema, "spec.mpiReplicaSpecs.{}.restartPolicy")["description"]
    assert "OnFailure for the launcher" in restart
    assert "plus one" in _at(schema, "spec.runPolicy.schedulingPolicy.minAvailable")["description"]


def test_schema_is_structural(schema: Schema) -> None:
    for path, node in _nodes(schema):
        assert not {"$ref", "allOf", "oneOf"} & set(node), path
        assert "x-kubernetes-preserve-unknown-fields" not in node, path
        assert "x-kubernetes-embedded-resource" not in node, path
        assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("x-kubernetes-int-or-string"):
            assert "type" not in node, path
            assert len(node["anyOf"]) == 2, path
        elif "<anyOf" not in path:
            assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}, path
    assert gen.structural_problems(schema) == []
    assert "$ref" not in CRD_FILE.read_text(encoding="utf-8")


def test_list_map_keys_are_required_or_defaulted(schema: Schema) -> None:
    list_maps = [(path, node) for path, node in _nodes(schema) if node.get("x-kubernetes-list-type") == "map"]
    assert len(list_maps) > 20
    for path, node in list_maps:
        items = node["items"]
        for key in node["x-kubernetes-list-map-keys"]:
            assert key in items.get("required", []) or "default" in items["properties"][key], (path, key)


def test_template_metadata_is_the_embedded_object_meta(schema: Schema) -> None:
    metadata = _at(schema, "spec.mpiReplicaSpecs.{}.template.metadata")
    assert set(metadata["properties"]) == {"annotations", "finalizers", "labels", "name", "namespace"}
    assert "x-kubernetes-list-type" not in metadata["properties"]["finalizers"]
    assert schema["properties"]["metadata"] == {"type": "object"}


def test_template_pod_spec_is_the_full_core_schema(pod_spec: Schema) -> None:
    assert pod_spec["required"] == ["containers"]
    for name in ("containers", "initContainers", "volumes", "affinity", "tolerations", "securityContext",
                 "topologySpreadConstraints", "resourceClaims", "schedulingGates", "hostnameOverride"):
        assert name in pod_spec["properties"], name
    containers = pod_spec["properties"]["containers"]
    assert containers["x-kubernetes-list-type"] == "map"
    assert containers["x-kubernetes-list-map-keys"] == ["name"]
    assert containers["items"]["required"] == ["name"]
    assert "x-kubernetes-patch-strategy" not in containers
    assert len(list(_nodes(pod_spec))) > 1000


def test_container_ports_follow_controller_gen(pod_spec: Schema) -> None:
    ports = _at(pod_spec, "containers.[].ports")
    assert ports["x-kubernetes-list-type"] == "map"
    assert ports["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    item = ports["items"]
    assert item["required"] == ["containerPort"]
    assert item["properties"]["protocol"]["default"] == "TCP"
    assert "default" not in item["properties"]["containerPort"]  # openapi-gen's implicit 0 is dropped
    assert item["properties"]["containerPort"]["format"] == "int32"


def test_resource_limits_are_quantities(pod_spec: Schema) -> None:
    for field in ("limits", "requests"):
        values = _at(pod_spec, f"containers.[].resources.{field}")["additionalProperties"]
        assert values["x-kubernetes-int-or-string"] is True
        assert values["pattern"] == QUANTITY_PATTERN
        assert values["anyOf"] == [{"type": "integer"}, {"type": "string"}]


def test_int_or_string(pod_spec: Schema) -> None:
    port = _at(pod_spec, "containers.[].readinessProbe.tcpSocket.port")
    assert port["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert port["x-kubernetes-int-or-string"] is True
    assert "pattern" not in port
    assert port["description"].startswith("Number or name of the port")


def test_core_defaults_are_only_explicit_markers(pod_spec: Schema) -> None:
    assert _at(pod_spec, "containers.[].env.[].valueFrom.configMapKeyRef.name")["default"] == ""
    assert _at(pod_spec, "imagePullSecrets.[].name")["default"] == ""
    assert "default" not in _at(pod_spec, "containers.[].name")  # required: openapi-gen's zero value dropped
    assert "default" not in _at(pod_spec, "containers.[].resources")  # openapi-gen's {} dropped
    for path, node in _nodes(pod_spec):
        assert not isinstance(node.get("default"), dict | list), path


def test_no_patch_or_gvk_extensions_and_no_core_enums(pod_spec: Schema) -> None:
    for path, node in _nodes(pod_spec):
        for key in ("x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key",
                    "x-kubernetes-group-version-kind", "x-kubernetes-unions", "enum"):
            assert key not in node, (path, key)
        assert "Possible enum values:" not in node.get("description", ""), path


# ---------------------------------------------------------------------------------------------
# The converter and the command line, on a small synthetic OpenAPI document (no go needed)


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _fake_schemas() -> dict[str, Schema]:
    core, meta = "io.k8s.api.core.v1.", "io.k8s.apimachinery.pkg.apis.meta.v1."
    string: Schema = {"type": "string", "default": ""}
    return {
        core + "Pod": {"type": "object", "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion doc."},
            "kind": {"type": "string", "description": "Kind doc."}}},
        core + "PodTemplateSpec": {"type": "object", "description": "Template doc.", "properties": {
            "metadata": {"allOf": [_ref(meta + "ObjectMeta")], "default": {}, "description": "Meta doc."},
            "spec": {"allOf": [_ref(core + "PodSpec")], "default": {}}}},
        meta + "ObjectMeta": {"type": "object", "properties": {
            "name": {"type": "string"}, "generateName": {"type": "string"}, "namespace": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": string},
            "annotations": {"type": "object", "additionalProperties": string},
            "finalizers": {"type": "array", "items": string, "x-kubernetes-list-type": "set",
                           "x-kubernetes-patch-strategy": "merge"}}},
        core + "PodSpec": {"type": "object", "description": "PodSpec doc.", "required": ["containers"],
                           "x-kubernetes-unions": [{}], "properties": {
            "containers": {"type": "array", "items": {"allOf": [_ref(core + "Container")], "default": {}},
                           "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                           "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"},
            "restartPolicy": {"type": "string", "enum": ["Always", "Never"],
                              "description": "Restart doc.\n\nPossible enum values:\n - `\"Always\"` always"},
            "overhead": {"type": "object", "additionalProperties": {"allOf": [_ref("io.k8s.apimachinery.pkg."
                                                                                  "api.resource.Quantity")]}}}},
        core + "Container": {"type": "object", "description": "Container doc.", "required": ["name"],
                             "properties": {
            "name": {"type": "string", "default": ""},
            "port": {"allOf": [_ref("io.k8s.apimachinery.pkg.util.intstr.IntOrString")], "description": "P."},
            "startedAt": {"allOf": [_ref(meta + "Time")], "description": "When."},
            "secretName": {"type": "string", "default": ""},
            "protocol": {"type": "string", "default": "TCP"},
            "size": {"type": "number", "format": "weird"}}},
        meta + "LabelSelector": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {
            "matchLabels": {"type": "object", "additionalProperties": string}}},
        "io.k8s.apimachinery.pkg.api.resource.Quantity": {"description": "Q.", "oneOf": [
            {"type": "string"}, {"type": "number"}]},
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"format": "int-or-string", "oneOf": [
            {"type": "integer"}, {"type": "string"}]},
        meta + "Time": {"type": "string", "format": "date-time", "description": "Time doc."},
    }


@pytest.fixture
def fake_doc(tmp_path: Path) -> Path:
    path = tmp_path / "api__v1_openapi.json"
    path.write_text(json.dumps({"openapi": "3.0.0", "components": {"schemas": _fake_schemas()}}))
    return path


def _fake_template() -> Schema:
    converted: Schema = gen.Converter(_fake_schemas()).ref("io.k8s.api.core.v1.PodTemplateSpec", "T.")
    return converted


def test_converter_inlines_refs_and_keeps_extensions() -> None:
    template = _fake_template()
    assert template["description"] == "T."
    spec = template["properties"]["spec"]
    assert spec["description"] == "PodSpec doc."  # the type's doc when the field has none
    containers = spec["properties"]["containers"]
    assert containers["x-kubernetes-list-map-keys"] == ["name"]
    assert set(containers) == {"items", "type", "x-kubernetes-list-map-keys", "x-kubernetes-list-type"}
    assert containers["items"]["description"] == "Container doc."
    assert "x-kubernetes-unions" not in spec
    assert gen.structural_problems(template) == []


def test_converter_special_types() -> None:
    spec = _fake_template()["properties"]["spec"]
    container = spec["properties"]["containers"]["items"]["properties"]
    assert container["port"] == {"anyOf": [{"type": "integer"}, {"type": "string"}], "description": "P.",
                                 "x-kubernetes-int-or-string": True}
    assert container["startedAt"] == {"description": "When.", "format": "date-time", "type": "string"}
    assert spec["properties"]["overhead"]["additionalProperties"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }
    assert "format" not in container["size"]  # not a format the API server knows for numbers


def test_converter_defaults_and_enums() -> None:
    spec = _fake_template()["properties"]["spec"]
    container = spec["properties"]["containers"]["items"]["properties"]
    assert "default" not in container["name"]  # required: implicit zero value
    assert container["secretName"]["default"] == ""  # optional: explicit +default
    assert container["protocol"]["default"] == "TCP"
    assert "default" not in spec
    assert "default" not in spec["properties"]["containers"]["items"]
    restart = spec["properties"]["restartPolicy"]
    assert restart == {"description": "Restart doc.", "type": "string"}  # live-server enums removed


def test_converter_embedded_object_meta() -> None:
    metadata = _fake_template()["properties"]["metadata"]
    assert metadata["description"] == "Meta doc."
    assert set(metadata["properties"]) == {"annotations", "finalizers", "labels", "name", "namespace"}
    assert metadata["properties"]["finalizers"] == {"items": {"type": "string"}, "type": "array"}
    assert metadata["properties"]["labels"]["additionalProperties"] == {"type": "string"}


def test_converter_rejects_what_it_cannot_convert() -> None:
    schemas = _fake_schemas()
    schemas["io.k8s.api.core.v1.Container"]["properties"]["odd"] = {"type": "string", "not": {}}
    with pytest.raises(ValueError, match="unsupported OpenAPI keywords"):
        gen.Converter(schemas).ref("io.k8s.api.core.v1.PodTemplateSpec")
    schemas = _fake_schemas()
    schemas["io.k8s.api.core.v1.Container"]["properties"]["self"] = _ref("io.k8s.api.core.v1.Container")
    with pytest.raises(ValueError, match="recursive"):
        gen.Converter(schemas).ref("io.k8s.api.core.v1.PodTemplateSpec")
    schemas = _fake_schemas()
    del schemas["io.k8s.api.core.v1.Container"]["type"]
    with pytest.raises(ValueError, match="no valid type"):
        gen.Converter(schemas).ref("io.k8s.api.core.v1.PodTemplateSpec")


def test_structural_problems_finds_list_map_keys_without_default() -> None:
    node: Schema = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                    "items": {"type": "object", "properties": {"k": {"type": "string"}}}}
    assert gen.structural_problems(node) == ["<root>: list-map key 'k' is neither required nor defaulted"]
    node["items"]["properties"]["k"]["default"] = "x"
    assert gen.structural_problems(node) == []


def test_cli_writes_checks_and_prints(fake_doc: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "crd.yaml"
    assert gen.main(["--openapi-file", str(fake_doc), "--output", str(out)]) == 0
    assert gen.main(["--openapi-file", str(fake_doc), "--output", str(out), "--check"]) == 0
    out.write_text(out.read_text().replace("scope: Namespaced", "scope: Cluster"))
    capsys.readouterr()
    assert gen.main(["--openapi-file", str(fake_doc), "--output", str(out), "--check"]) == 1
    diff = capsys.readouterr().out
    assert "-  scope: Cluster" in diff
    assert "+  scope: Namespaced" in diff
    assert gen.main(["--openapi-file", str(fake_doc), "--output", "-"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("# Code generated by hack/gen/crd.py")
    assert yaml.safe_load(printed)["metadata"]["name"] == "mpijobs.kubeflow.org"
    patch = tmp_path / "crd-patch.yaml"
    argv = ["--openapi-file", str(fake_doc), "--output", str(out), "--v2-output", str(patch)]
    assert gen.main(argv) == 0
    assert gen.main([*argv, "--check"]) == 0
    assert [op["path"] for op in yaml.safe_load(patch.read_text())] == [
        "/metadata/annotations", "/spec/conversion", "/spec/versions/-"]
    patch.write_text(patch.read_text().replace("served: true", "served: false"))
    assert gen.main([*argv, "--check"]) == 1


def test_cli_reports_an_unusable_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"components": {"schemas": {}}}')
    assert gen.main(["--openapi-file", str(bad), "--output", "-"]) == gen.EXIT_SOURCE_UNAVAILABLE
    assert "not the core/v1 OpenAPI v3 document" in capsys.readouterr().err


def _kubeconfig(tmp_path: Path, cluster: Schema, user: Schema) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": cluster}], "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }))
    return path


@pytest.mark.parametrize(
    ("cluster", "user", "error"),
    [
        ({"server": "https://127.0.0.1:1"}, {"token": "t"}, "GET https://127.0.0.1:1/version failed"),
        ({"server": "https://127.0.0.1:1", "certificate-authority-data": "bm90IGEgY2VydA=="}, {},
         "unusable credentials"),
        ({}, {}, "has no server"),
    ],
    ids=["unreachable", "bad-ca", "no-server"],
)
def test_from_server_reports_unusable_kubeconfigs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cluster: Schema, user: Schema, error: str,
) -> None:
    kubeconfig = _kubeconfig(tmp_path, cluster, user)
    argv = ["--from-server", "--kubeconfig", str(kubeconfig), "--output", "-"]
    assert gen.main(argv) == gen.EXIT_SOURCE_UNAVAILABLE
    assert error in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# (c) upstream's examples are valid against the schema (a small structural checker)


def _type_ok(value: Any, type_: str) -> bool:
    checks: dict[str, Any] = {
        "object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    }
    return bool(checks[type_](value))


def validate(node: Schema, value: Any, path: str = "") -> list[str]:
    """Type, required, enum, pattern and unknown-field errors of `value` (nulls count as absent)."""
    if value is None:  # the API server drops nulls of non-nullable fields
        return []
    if node.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            return [f"{path}: must be an integer or a string"]
        if isinstance(value, str) and "pattern" in node and not re.search(node["pattern"], value):
            return [f"{path}: {value!r} does not match the pattern"]
        return []
    if not _type_ok(value, node["type"]):
        return [f"{path}: must be of type {node['type']}"]
    errors = [f"{path}: {value!r} is not one of {node['enum']}"] if value not in node.get("enum", [value]) else []
    if node["type"] == "array":
        for i, item in enumerate(value):
            errors += validate(node["items"], item, f"{path}[{i}]")
    if node["type"] == "object":
        errors += _validate_object(node, value, path)
    return errors


def _validate_object(node: Schema, value: dict[str, Any], path: str) -> list[str]:
    errors = [f"{path}.{name}: required" for name in node.get("required", []) if value.get(name) is None]
    props, extra = node.get("properties"), node.get("additionalProperties")
    if props is None and extra is None:  # only the root metadata: not pruned
        return errors
    for key, sub in value.items():
        if props is not None and key in props:
            errors += validate(props[key], sub, f"{path}.{key}")
        elif extra is not None:
            errors += validate(extra, sub, f"{path}.{key}")
        else:
            errors.append(f"{path}.{key}: unknown field (the API server would prune it)")
    return errors


@pytest.mark.parametrize("example", example_params())
def test_upstream_example_is_valid(schema: Schema, example: Path) -> None:
    docs = [d for d in yaml.safe_load_all(example.read_text(encoding="utf-8")) if d]
    assert docs
    for doc in docs:
        assert doc["kind"] == "MPIJob"
        assert validate(schema, doc) == []


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda j: j["spec"].update(mpiImplementation="Foo"), ".spec.mpiImplementation: 'Foo' is not one of"),
        (lambda j: j["spec"].pop("mpiReplicaSpecs"), ".spec.mpiReplicaSpecs: required"),
        (lambda j: j["spec"].update(slotsPerWorker="1"), ".spec.slotsPerWorker: must be of type integer"),
        (lambda j: j["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].pop("name"),
         ".template.spec.containers[0].name: required"),
        (lambda j: j["spec"]["runPolicy"].update(schedulingPolicy={"minResources": {"cpu": "1 core"}}),
         ".minResources.cpu: '1 core' does not match the pattern"),
        (lambda j: j["spec"].update(extra=True), ".spec.extra: unknown field"),
        (lambda j: j.update(status={"conditions": [{"type": "Created", "status": "Yes"}]}),
         ".status.conditions[0].status: 'Yes' is not one of"),
    ],
    ids=["enum", "required", "type", "container-name", "quantity", "pruned", "condition-status"],
)
def test_checker_sees_invalid_jobs(schema: Schema, change: Any, error: str) -> None:
    job: Schema = {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "pi"},
        "spec": {"runPolicy": {}, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": {"containers": [{"name": "l", "image": "i"}]}}},
            "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}}},
        }},
    }
    assert validate(schema, job) == []
    broken = copy.deepcopy(job)
    change(broken)
    errors = validate(schema, broken)
    assert len(errors) == 1, errors
    assert error in errors[0]


# ---------------------------------------------------------------------------------------------
# (c) kubeflow.org/v2: v2beta1's schema plus failurePolicy and the checks of docs/proposals/v2.md


@pytest.fixture(scope="module")
def v2(crd_v2: Schema) -> Schema:
    root: Schema = crd_v2["spec"]["versions"][1]["schema"]["openAPIV3Schema"]
    return root


def _without_v2_changes(node: Any) -> Any:
    """The v2 schema with every keyword v2 adds removed: what remains must be v2beta1's."""
    if isinstance(node, list):
        return [_without_v2_changes(item) for item in node]
    if not isinstance(node, dict):
        return node
    kept = {k: _without_v2_changes(v) for k, v in node.items()
            if k not in ("x-kubernetes-validations", "maxProperties", "minimum", "failurePolicy", "workerBackend")}
    return kept


V2_ENUMS = [
    ("spec.launcherCreationPolicy", ["AtStartup", "WaitForWorkersReady"]),
    ("spec.runPolicy.cleanPodPolicy", ["All", "Running", "None"]),
    ("spec.runPolicy.managedBy", ["kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue"]),
    ("spec.mpiReplicaSpecs.{}.restartPolicy", ["Never", "OnFailure"]),
    ("spec.runPolicy.failurePolicy.rules.[].action", ["RestartJob", "FailJob"]),
    ("spec.runPolicy.failurePolicy.rules.[].onReplicaTypes.[]", ["Launcher", "Worker"]),
    ("spec.runPolicy.failurePolicy.rules.[].onPodConditions.[].status", ["True", "False", "Unknown"]),
    ("spec.runPolicy.failurePolicy.rules.[].onExitCodes.operator", ["In", "NotIn"]),
    ("spec.workerBackend", ["Pods", "IndexedJob"]),
]


def test_v2_differs_from_v2beta1_only_as_the_proposal_says(schema: Schema, v2: Schema) -> None:
    stripped = _without_v2_changes(v2)
    for path, _ in V2_ENUMS[:4]:
        _at(stripped, path).pop("enum")
    assert stripped == schema


@pytest.mark.parametrize(("path", "values"), V2_ENUMS, ids=[p for p, _ in V2_ENUMS])
def test_v2_enums(v2: Schema, path: str, values: list[str]) -> None:
    assert _at(v2, path)["enum"] == values


def test_v2_minimums(v2: Schema) -> None:
    paths = ["spec.slotsPerWorker", "spec.runPolicy.ttlSecondsAfterFinished", "spec.runPolicy.activeDeadlineSeconds",
             "spec.runPolicy.backoffLimit", "spec.runPolicy.failurePolicy.maxRestarts"]
    assert {p: _at(v2, p)["minimum"] for p in paths} == dict.fromkeys(paths, 0)


def test_v2_cel_rules(v2: Schema) -> None:
    rules = {path: [r["message"] for r in node["x-kubernetes-validations"]]
             for path, node in _nodes(v2) if "x-kubernetes-validations" in node}
    assert rules == {
        ".spec": ["failurePolicy is immutable", "workerBackend is immutable"],
        ".spec.mpiReplicaSpecs": ["only Launcher and Worker are supported", "must have Launcher replica spec",
                                  "Launcher replicas must be 1", "Worker replicas must be greater than or equal to 1"],
        ".spec.runPolicy": ["managedBy is immutable"],
        ".spec.runPolicy.failurePolicy": ["maxRestarts is required with a RestartJob rule"],
        ".spec.runPolicy.failurePolicy.rules[]": ["exactly one of onPodConditions and onExitCodes is required"],
        ".spec.runPolicy.failurePolicy.rules[].onExitCodes": ["0 is not allowed with the In operator"],
        ".spec.runPolicy.failurePolicy.rules[].onExitCodes.values": ["values must be sorted ascending"],
    }
    assert _at(v2, "spec.mpiReplicaSpecs")["maxProperties"] == 2


def test_v2_worker_backend_schema(v2: Schema) -> None:
    """No default (a job that says nothing gets the operator's --default-worker-backend); set once, at creation: the
    rule is on spec, so that adding or removing the field is a change too, and names the field."""
    backend = _at(v2, "spec.workerBackend")
    assert set(backend) == {"description", "enum", "type"}
    assert (backend["type"], backend["enum"]) == ("string", ["Pods", "IndexedJob"])
    assert "--default-worker-backend" in backend["description"]
    [rule] = [r for r in _at(v2, "spec")["x-kubernetes-validations"] if r["message"] == "workerBackend is immutable"]
    assert rule == {"fieldPath": ".workerBackend", "message": "workerBackend is immutable",
                    "rule": "has(self.workerBackend) == has(oldSelf.workerBackend) && "
                            "(!has(self.workerBackend) || self.workerBackend == oldSelf.workerBackend)"}


def test_v2_failure_policy_schema(v2: Schema) -> None:
    policy = _at(v2, "spec.runPolicy.failurePolicy")
    assert policy["required"] == ["rules"]
    rules = policy["properties"]["rules"]
    assert (rules["minItems"], rules["maxItems"], rules["x-kubernetes-list-type"],
            rules["x-kubernetes-list-map-keys"]) == (1, 20, "map", ["name"])
    rule = rules["items"]
    assert rule["required"] == ["name", "action"]
    assert set(rule["properties"]) == {"name", "action", "onReplicaTypes", "onPodConditions", "onExitCodes"}
    assert (rule["properties"]["name"]["maxLength"], rule["properties"]["name"]["pattern"]) == (
        63, "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    assert _at(v2, "spec.runPolicy.failurePolicy.rules.[].onPodConditions.[].status")["default"] == "True"
    values = _at(v2, "spec.runPolicy.failurePolicy.rules.[].onExitCodes.values")
    assert (values["minItems"], values["maxItems"], values["x-kubernetes-list-type"]) == (1, 255, "set")
