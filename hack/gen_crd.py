#!/usr/bin/env python3
"""Generate the MPIJob CRD, deploy/crds/kubeflow.org_mpijobs.yaml.

The MPIJob-owned part of the schema (spec, status) is declared here with upstream's types, formats,
enums and CRD defaults. The pod template schema is never written by hand: it is converted from the
core/v1 OpenAPI v3 document of a pinned Kubernetes release, read from the Go module
k8s.io/kubernetes (default), from a local copy (--openapi-file) or from a live API server
(--from-server --kubeconfig PATH). See docs/crd.md.
"""

from __future__ import annotations

import argparse
import base64
import copy
import difflib
import ipaddress
import json
import os
import ssl
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

Schema = dict[str, Any]

K8S_VERSION = "v1.36.3"
K8S_MODULE = "k8s.io/kubernetes"
MODULE_OPENAPI_FILE = "api/openapi-spec/v3/api__v1_openapi.json"
SERVER_OPENAPI_PATH = "/openapi/v3/api/v1"
REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
EXIT_DIFFERS = 1
EXIT_SOURCE_UNAVAILABLE = 3

REF_PREFIX = "#/components/schemas/"
POD = "io.k8s.api.core.v1.Pod"
POD_TEMPLATE_SPEC = "io.k8s.api.core.v1.PodTemplateSpec"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
LABEL_SELECTOR = "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
TIME_TYPES = frozenset({"io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"})
# controller-gen's embedded ObjectMeta (crd:generateEmbeddedObjectMeta=true) keeps only these fields.
EMBEDDED_META_FIELDS = frozenset({"annotations", "finalizers", "labels", "name", "namespace"})
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

# OpenAPI keywords copied as they are; anything not listed here or in DROPPED_KEYS is an error, so
# that a new keyword in a future Kubernetes release is looked at instead of silently lost.
COPIED_KEYS = frozenset({
    "type", "required", "pattern", "minimum", "maximum", "minLength", "maxLength",
    "minItems", "maxItems", "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
})
CONVERTED_KEYS = frozenset({"properties", "items", "additionalProperties", "default", "format", "description"})
# `enum` (and the "Possible enum values:" part of descriptions) comes only from a live API server, where
# the OpenAPIEnums feature gate is on; the snapshot in k8s.io/kubernetes is generated with it off.
# Dropping both makes the two sources give the same CRD, and matches controller-gen, which ignores
# the core types' `+enum` markers.
DROPPED_KEYS = frozenset({
    "x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key", "x-kubernetes-group-version-kind",
    "x-kubernetes-unions", "enum",
})
ENUM_DESCRIPTION_HEADER = "Possible enum values:"
SCHEMA_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
# The string formats a v1.36 API server validates (apiextensions-apiserver formats.go); others are dropped.
STRING_FORMATS = frozenset({
    "bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid", "uuid3", "uuid4",
    "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor", "rgbcolor", "byte", "password",
    "date", "duration", "date-time", "datetime", "k8s-short-name", "k8s-long-name",
})
NUMERIC_FORMATS = {"integer": frozenset({"int32", "int64"}), "number": frozenset({"float", "double"})}


class SourceError(Exception):
    """The OpenAPI document could not be obtained: no go command, no module, unreachable server."""


# ---------------------------------------------------------------------------------------------
# Sources of the core/v1 OpenAPI v3 document


def module_openapi_file(version: str = K8S_VERSION) -> Path:
    """Path of the core/v1 OpenAPI v3 file inside the k8s.io/kubernetes module (downloaded if needed)."""
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            proc = subprocess.run(
                ["go", "mod", "download", "-json", f"{K8S_MODULE}@{version}"],
                cwd=tmp, env=env, capture_output=True, text=True, check=False,
            )
        except FileNotFoundError as exc:
            raise SourceError("the go command is not installed") from exc
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        info = {}
    if proc.returncode != 0 or not info.get("Dir"):
        detail = info.get("Error") or proc.stderr.strip() or f"exit status {proc.returncode}"
        raise SourceError(f"go mod download {K8S_MODULE}@{version} failed: {detail}")
    return Path(info["Dir"]) / MODULE_OPENAPI_FILE


def load_openapi_file(path: Path) -> dict[str, Schema]:
    """The component schemas of a core/v1 OpenAPI v3 document stored in `path`."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SourceError(f"cannot read {path}: {exc}") from exc
    return component_schemas(doc, str(path))


def component_schemas(doc: Any, origin: str) -> dict[str, Schema]:
    """`components.schemas` of an OpenAPI v3 document, which must describe core/v1."""
    schemas = doc.get("components", {}).get("schemas") if isinstance(doc, dict) else None
    if not isinstance(schemas, dict) or POD_TEMPLATE_SPEC not in schemas:
        raise SourceError(f"{origin} is not the core/v1 OpenAPI v3 document (no {POD_TEMPLATE_SPEC})")
    return schemas


def fetch_from_server(kubeconfig: Path, expected_version: str) -> dict[str, Schema]:
    """The core/v1 component schemas served by the API server of the kubeconfig's current context."""
    cluster, user = _current_context(kubeconfig)
    server = str(cluster.get("server", "")).rstrip("/")
    if not server:
        raise SourceError(f"{kubeconfig}: the current context's cluster has no server")
    with tempfile.TemporaryDirectory() as tmp:  # private (0700) directory for embedded keys
        try:
            opener = _opener(server, _ssl_context(cluster, user, kubeconfig.parent, Path(tmp)))
            headers = _auth_headers(user, kubeconfig.parent)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError, bad base64 a ValueError
            raise SourceError(f"{kubeconfig}: unusable credentials: {exc}") from exc
        version = _get_json(opener, server + "/version", headers).get("gitVersion")
        if version != expected_version:
            print(f"gen_crd: warning: the server runs {version}, not {expected_version}", file=sys.stderr)
        doc = _get_json(opener, server + SERVER_OPENAPI_PATH, headers)
    return component_schemas(doc, server + SERVER_OPENAPI_PATH)


def _current_context(path: Path) -> tuple[Schema, Schema]:
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SourceError(f"cannot read kubeconfig {path}: {exc}") from exc
    context = _named(config.get("contexts"), config.get("current-context"), "context")
    cluster = _named(config.get("clusters"), context.get("cluster"), "cluster")
    user = _named(config.get("users"), context["user"], "user") if context.get("user") else {}
    return cluster, user


def _named(entries: Any, name: Any, kind: str) -> Schema:
    for entry in entries or []:
        if entry.get("name") == name:
            value = entry.get(kind) or {}
            return value if isinstance(value, dict) else {}
    raise SourceError(f"kubeconfig: no {kind} named {name!r}")


def _material(section: Schema, key: str, base: Path, tmp: Path) -> str | None:
    """A PEM file for `<key>-data` (written into `tmp`) or `<key>` (relative to the kubeconfig)."""
    data = section.get(f"{key}-data")
    if data:
        target = tmp / key
        target.write_bytes(base64.b64decode(data))
        return str(target)
    path = section.get(key)
    return str(base / path) if path else None


def _ssl_context(cluster: Schema, user: Schema, base: Path, tmp: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=_material(cluster, "certificate-authority", base, tmp))
    if cluster.get("insecure-skip-tls-verify"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert = _material(user, "client-certificate", base, tmp)
    if cert:
        context.load_cert_chain(cert, _material(user, "client-key", base, tmp))
    return context


def _auth_headers(user: Schema, base: Path) -> dict[str, str]:
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = (base / user["tokenFile"]).read_text(encoding="utf-8").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


def _opener(server: str, context: ssl.SSLContext) -> urllib.request.OpenerDirector:
    """An opener that, like client-go, never sends loopback traffic through an HTTP(S) proxy."""
    host = urllib.parse.urlsplit(server).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    handlers: list[urllib.request.BaseHandler] = [urllib.request.HTTPSHandler(context=context)]
    if loopback:
        handlers.append(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener(*handlers)


def _get_json(opener: urllib.request.OpenerDirector, url: str, headers: dict[str, str]) -> Any:
    request = urllib.request.Request(url, headers={"Accept": "application/json", **headers})
    try:
        with opener.open(request, timeout=60) as response:
            return json.loads(response.read())
    except (OSError, ValueError) as exc:  # urllib.error.URLError is an OSError
        raise SourceError(f"GET {url} failed: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# OpenAPI v3 -> structural CRD schema


def int_or_string(pattern: str | None = None, description: str | None = None) -> Schema:
    """controller-gen's schema for IntOrString, or for Quantity when given the quantity pattern."""
    node: Schema = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
    if pattern:
        node["pattern"] = pattern
    if description:
        node["description"] = description
    return _sorted(node)


def _special(name: str, description: str | None) -> Schema | None:
    if name == INT_OR_STRING:
        return int_or_string(description=description)
    if name == QUANTITY:
        return int_or_string(QUANTITY_PATTERN, description)
    if name in TIME_TYPES:
        return field("string", description, format="date-time")
    return None


def _ref_target(node: Schema) -> str | None:
    ref = node.get("$ref")
    if ref is None and isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
        ref = node["allOf"][0].get("$ref")
    if ref is None:
        return None
    if not ref.startswith(REF_PREFIX):
        raise ValueError(f"unsupported $ref {ref!r}")
    return str(ref[len(REF_PREFIX):])


def _description(text: str | None) -> str | None:
    """`text` without the enum section a live server appends (what apiserver's pruneEnums does)."""
    if text is None or ENUM_DESCRIPTION_HEADER not in text:
        return text
    return text[: text.index(ENUM_DESCRIPTION_HEADER)].strip()


def _format_ok(type_: Any, fmt: Any) -> bool:
    if type_ == "string":
        return fmt in STRING_FORMATS
    return fmt in NUMERIC_FORMATS.get(str(type_), frozenset())


class Converter:
    """Turns OpenAPI v3 component schemas into structural CRD schemas, with every $ref inlined.

    Defaults: the OpenAPI document also carries openapi-gen's implicit zero values (`{}` for each
    non-pointer struct, `""`/`0` for non-omitempty fields, list items and map values). Only explicit
    `+default` markers matter to a CRD (as with controller-gen), so a default is kept only when it is
    a scalar on an optional property; defaults on items, map values and required properties are dropped.
    """

    def __init__(self, schemas: Mapping[str, Schema]) -> None:
        self.schemas = schemas
        self._expanding: list[str] = []

    def ref(self, name: str, description: str | None = None) -> Schema:
        """The structural schema of component `name`, with `description` instead of the type's own."""
        wrapper: Schema = {"$ref": REF_PREFIX + name}
        if description:
            wrapper["description"] = description
        return self.node(wrapper, name, default_ok=False)

    def property_of(self, type_name: str, prop: str) -> Schema:
        """The structural schema of property `prop` of component `type_name`."""
        return self.node(self._definition(type_name)["properties"][prop], f"{type_name}.{prop}", default_ok=False)

    def node(self, node: Schema, path: str, *, default_ok: bool) -> Schema:
        """Convert one schema node; `default_ok` says whether an explicit default may live here."""
        target = _ref_target(node)
        if target is None:
            return self._plain(node, path, default_ok)
        overlay = {k: v for k, v in node.items() if k not in ("$ref", "allOf")}
        special = _special(target, _description(overlay.get("description")))
        if special is not None:
            return special
        if target in self._expanding:
            raise ValueError(f"{path}: recursive schema {target} cannot be inlined")
        self._expanding.append(target)
        try:
            return self._plain({**self._definition(target), **overlay}, path, default_ok)
        finally:
            self._expanding.pop()

    def _definition(self, name: str) -> Schema:
        if name not in self.schemas:
            raise ValueError(f"the OpenAPI document has no schema {name}")
        definition = dict(self.schemas[name])
        if name == OBJECT_META:
            definition["properties"] = _embedded_meta(definition["properties"])
        return definition

    def _plain(self, node: Schema, path: str, default_ok: bool) -> Schema:
        unknown = set(node) - COPIED_KEYS - CONVERTED_KEYS - DROPPED_KEYS
        if unknown:
            raise ValueError(f"{path}: unsupported OpenAPI keywords {sorted(unknown)}")
        out: Schema = {k: copy.deepcopy(v) for k, v in node.items() if k in COPIED_KEYS}
        if out.get("type") not in SCHEMA_TYPES:
            raise ValueError(f"{path}: no valid type ({out.get('type')!r})")
        required = node.get("required", [])
        if "properties" in node:
            out["properties"] = {
                name: self.node(sub, f"{path}.{name}", default_ok=name not in required)
                for name, sub in sorted(node["properties"].items())
            }
        if "items" in node:
            out["items"] = self.node(node["items"], f"{path}[]", default_ok=False)
        if "additionalProperties" in node:
            if not isinstance(node["additionalProperties"], dict):
                raise ValueError(f"{path}: additionalProperties must be a schema")
            out["additionalProperties"] = self.node(node["additionalProperties"], f"{path}{{}}", default_ok=False)
        if default_ok and isinstance(node.get("default"), str | int | float | bool):
            out["default"] = node["default"]
        if "format" in node and _format_ok(out["type"], node["format"]):
            out["format"] = node["format"]
        if _description(node.get("description")):
            out["description"] = _description(node["description"])
        return _sorted(out)


def _embedded_meta(props: Schema) -> Schema:
    """ObjectMeta reduced like controller-gen's embedded ObjectMeta: five fields, finalizers a plain list.

    ObjectMeta declares finalizers a set, but the API server does not reject duplicates in a Pod, nor
    did upstream's CRD; a set here would reject such a template.
    """
    kept = {k: v for k, v in props.items() if k in EMBEDDED_META_FIELDS}
    kept["finalizers"] = {k: v for k, v in kept["finalizers"].items() if k != "x-kubernetes-list-type"}
    return kept


def structural_problems(node: Schema, path: str = "") -> list[str]:
    """Violations of the API server's structural-schema rules that a converted schema could have."""
    problems = _node_problems(node, path or "<root>")
    for name, sub in node.get("properties", {}).items():
        problems += structural_problems(sub, f"{path}.{name}")
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(node.get(key), dict):
            problems += structural_problems(node[key], path + suffix)
    return problems


def _node_problems(node: Schema, path: str) -> list[str]:
    problems = [f"{path}: has {key}" for key in ("$ref", "allOf", "oneOf") if key in node]
    if node.get("x-kubernetes-int-or-string"):
        if "type" in node or "anyOf" not in node:
            problems.append(f"{path}: int-or-string must have anyOf and no type")
    elif node.get("type") not in SCHEMA_TYPES:
        problems.append(f"{path}: no type")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: both properties and additionalProperties")
    return problems + _list_problems(node, path)


def _list_problems(node: Schema, path: str) -> list[str]:
    items = node.get("items", {})
    list_type = node.get("x-kubernetes-list-type")
    if list_type == "set" and items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
        return [f"{path}: set of objects that are not atomic"]
    keys = node.get("x-kubernetes-list-map-keys") or []
    if (list_type == "map") != bool(keys):
        return [f"{path}: x-kubernetes-list-type map needs x-kubernetes-list-map-keys and vice versa"]
    problems = []
    for key in keys:
        prop = items.get("properties", {}).get(key)
        if prop is None or prop.get("type") in ("object", "array"):
            problems.append(f"{path}: list-map key {key!r} is not a scalar property of the items")
        elif key not in items.get("required", []) and "default" not in prop:
            problems.append(f"{path}: list-map key {key!r} is neither required nor defaulted")
    return problems


def _sorted(node: Schema) -> Schema:
    """Schema keys in alphabetical order, as controller-gen writes them."""
    return dict(sorted(node.items()))


# ---------------------------------------------------------------------------------------------
# The MPIJob-owned schema (kubeflow.org/v2beta1)


def field(type_: str, description: str | None, **extra: Any) -> Schema:
    """A schema node of `type_`; `extra` holds format, default, enum and the like."""
    node: Schema = {"type": type_, **extra}
    if description:
        node["description"] = description
    return _sorted(node)


def obj(description: str, properties: dict[str, Schema], **extra: Any) -> Schema:
    """An object schema with its properties in alphabetical order."""
    return field("object", description, properties=dict(sorted(properties.items())), **extra)


def mpijob_schema(conv: Converter) -> Schema:
    """The openAPIV3Schema of kind MPIJob."""
    return obj(
        "MPIJob runs an MPI program: one launcher pod runs mpirun, which starts the MPI processes on a "
        "set of worker pods over SSH.",
        {
            "apiVersion": conv.property_of(POD, "apiVersion"),
            "kind": conv.property_of(POD, "kind"),
            "metadata": {"type": "object"},
            "spec": spec_schema(conv),
            "status": status_schema(conv),
        },
    )


def spec_schema(conv: Converter) -> Schema:
    """MPIJobSpec."""
    return obj(
        "MPIJobSpec is the desired state of an MPIJob.",
        {
            "slotsPerWorker": field(
                "integer", "Number of MPI slots (processes) per worker, written into the hostfile. Defaults to 1.",
                format="int32", default=1),
            "runLauncherAsWorker": field(
                "boolean", "Whether the launcher pod also runs MPI processes: it is then listed first in the "
                "hostfile and in discover_hosts.sh. Defaults to false.", default=False),
            "runPolicy": run_policy_schema(),
            "mpiReplicaSpecs": field(
                "object", "The pod specifications, keyed by replica type: Launcher (required, exactly 1 "
                "replica) and Worker (optional, at least 1 replica). Other keys are ignored by the controller.",
                additionalProperties=replica_spec_schema(conv)),
            "sshAuthMountPath": field(
                "string", "Directory where the generated SSH keys are mounted in the first container of the "
                "launcher and of every worker. Defaults to /root/.ssh; when the containers run as a "
                "non-root user, set it to that user's ~/.ssh, e.g. /home/mpiuser/.ssh.",
                default="/root/.ssh"),
            "launcherCreationPolicy": field(
                "string", "When the launcher is created: AtStartup (the default) creates it together with the "
                "workers; WaitForWorkersReady creates it once every worker pod is Ready.", default="AtStartup"),
            "mpiImplementation": field(
                "string", "The MPI implementation used by the launcher's mpirun. It selects the hostfile "
                "format and the launcher environment variables: OpenMPI (the default), Intel or MPICH.",
                default="OpenMPI", enum=["OpenMPI", "Intel", "MPICH"]),
        },
        required=["mpiReplicaSpecs"],
    )


def run_policy_schema() -> Schema:
    """RunPolicy."""
    return obj(
        "RunPolicy holds the policies that apply to the job as a whole.",
        {
            "cleanPodPolicy": field(
                "string", "Which worker pods are deleted once the job has finished: Running (running and "
                "pending workers), All, or None (the default)."),
            "ttlSecondsAfterFinished": field(
                "integer", "Passed to the launcher Job: seconds after the launcher finishes before it and "
                "its pods are deleted. Unset means they are kept. The MPIJob itself is not deleted.",
                format="int32"),
            "activeDeadlineSeconds": field(
                "integer", "Passed to the launcher Job: seconds the launcher may run, counted from its "
                "start, before it is terminated and the job fails. Must not be negative.", format="int64"),
            "backoffLimit": field(
                "integer", "Passed to the launcher Job: number of launcher retries before the job fails "
                "(Kubernetes defaults it to 6). Must not be negative.", format="int32"),
            "schedulingPolicy": scheduling_policy_schema(),
            "suspend": field(
                "boolean", "Whether the job is suspended: the controller deletes the worker pods and suspends "
                "the launcher Job; setting it back to false recreates them. Defaults to false.", default=False),
            "managedBy": field(
                "string", "The controller that reconciles this job: kubeflow.org/mpi-operator (when unset) or "
                "kueue.x-k8s.io/multikueue. The MPI operator ignores a job managed by anything else. The "
                "field is meant to be immutable."),
        },
    )


def scheduling_policy_schema() -> Schema:
    """SchedulingPolicy (gang scheduling with volcano or scheduler-plugins)."""
    return obj(
        "SchedulingPolicy configures the PodGroup created for gang scheduling.",
        {
            "minAvailable": field(
                "integer", "Minimum number of pods that must be schedulable together (the PodGroup's "
                "minMember). Defaults to the number of workers plus one (the launcher).", format="int32"),
            "queue": field(
                "string", "volcano queue of the PodGroup. Falls back to the MPIJob annotation "
                "scheduling.volcano.sh/queue-name; ignored by scheduler-plugins."),
            "minResources": field(
                "object", "Minimum resources the PodGroup needs (scheduler-plugins minResources). Computed "
                "from the pod templates when unset.", additionalProperties=int_or_string(QUANTITY_PATTERN)),
            "priorityClass": field(
                "string", "PriorityClass of the PodGroup. Defaults to the priorityClassName of the launcher "
                "template, then of the worker template."),
            "scheduleTimeoutSeconds": field(
                "integer", "Seconds scheduler-plugins waits for the whole group to be scheduled; ignored by "
                "volcano.", format="int32"),
        },
    )


def replica_spec_schema(conv: Converter) -> Schema:
    """ReplicaSpec, with the full core/v1 PodTemplateSpec schema."""
    return obj(
        "ReplicaSpec describes the pods of one replica type.",
        {
            "replicas": field(
                "integer", "Number of pods. The launcher must have exactly 1 (the default); workers need at "
                "least 1 (an unset Worker replicas defaults to 0, which is rejected).", format="int32"),
            "restartPolicy": field(
                "string", "Restart policy of the pods, overriding the template's: OnFailure or Never. "
                "Defaults to OnFailure for the launcher and Never for workers."),
            "template": conv.ref(POD_TEMPLATE_SPEC, "The pod template of this replica type."),
        },
    )


def status_schema(conv: Converter) -> Schema:
    """JobStatus."""
    return obj(
        "JobStatus is the observed state of an MPIJob, written by the controller.",
        {
            "conditions": field(
                "array", "The job's conditions, at most one per type.", items=condition_schema(),
                **{"x-kubernetes-list-map-keys": ["type"], "x-kubernetes-list-type": "map"}),
            "replicaStatuses": field(
                "object", "Pod counts per replica type (Launcher, Worker).",
                additionalProperties=replica_status_schema(conv)),
            "startTime": field(
                "string", "When the controller started the job; reset when the job is resumed.",
                format="date-time"),
            "completionTime": field("string", "When the job finished.", format="date-time"),
            "lastReconcileTime": field("string", "Not set by the controller.", format="date-time"),
        },
    )


def condition_schema() -> Schema:
    """JobCondition."""
    return obj(
        "JobCondition describes one aspect of the job's state.",
        {
            "type": field("string", "Condition type: Created, Running, Restarting, Succeeded, Suspended or Failed."),
            "status": field("string", "Status of the condition: True, False or Unknown.",
                            enum=["True", "False", "Unknown"]),
            "reason": field("string", "A machine-readable, CamelCase reason for the last transition."),
            "message": field("string", "A human-readable message about the last transition."),
            "lastUpdateTime": field("string", "The last time the condition was updated.", format="date-time"),
            "lastTransitionTime": field(
                "string", "The last time the condition changed from one status to another.", format="date-time"),
        },
        required=["type", "status"],
    )


def replica_status_schema(conv: Converter) -> Schema:
    """ReplicaStatus."""
    return obj(
        "ReplicaStatus counts the pods of one replica type.",
        {
            "active": field("integer", "Number of running pods.", format="int32"),
            "succeeded": field("integer", "Number of pods that succeeded.", format="int32"),
            "failed": field("integer", "Number of pods that failed.", format="int32"),
            "labelSelector": conv.ref(LABEL_SELECTOR, "Deprecated: use selector. Not set by the controller."),
            "selector": field("string", "Label selector of the pods, in string form. Not set by the controller."),
        },
    )


PRINTER_COLUMNS: list[Schema] = [
    {"description": "Type of the most recent condition", "jsonPath": ".status.conditions[-1:].type",
     "name": "State", "type": "string"},
    {"description": "Number of worker pods", "jsonPath": ".spec.mpiReplicaSpecs.Worker.replicas",
     "name": "Workers", "type": "integer"},
    {"description": "MPI implementation", "jsonPath": ".spec.mpiImplementation", "name": "Implementation",
     "priority": 1, "type": "string"},
    {"description": "MPI slots per worker", "jsonPath": ".spec.slotsPerWorker", "name": "Slots",
     "priority": 1, "type": "integer"},
    {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
]


def build_crd(schemas: Mapping[str, Schema]) -> Schema:
    """The MPIJob CustomResourceDefinition, from the core/v1 component schemas."""
    schema = mpijob_schema(Converter(schemas))
    problems = structural_problems(schema)
    if problems:
        raise ValueError("the generated schema is not structural:\n  " + "\n  ".join(problems))
    version = {
        "additionalPrinterColumns": copy.deepcopy(PRINTER_COLUMNS),
        "name": "v2beta1",
        "schema": {"openAPIV3Schema": schema},
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
    }
    names = {"categories": ["kubeflow"], "kind": "MPIJob", "listKind": "MPIJobList", "plural": "mpijobs",
             "shortNames": ["mpij"], "singular": "mpijob"}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "mpijobs.kubeflow.org"},
        "spec": {"group": "kubeflow.org", "names": names, "scope": "Namespaced", "versions": [version]},
    }


# ---------------------------------------------------------------------------------------------
# Output


class _Dumper(yaml.SafeDumper):
    """Block style, multi-line strings as literal blocks, and no anchors/aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _represent_str)


def header(version: str) -> str:
    return (
        "# Code generated by hack/gen_crd.py; DO NOT EDIT. Regenerate with `make crd` (see docs/crd.md).\n"
        "# The MPIJob CRD (kubeflow.org/v2beta1). The pod template schema is converted from the core/v1\n"
        f"# OpenAPI v3 document of Kubernetes {version}: {MODULE_OPENAPI_FILE} in the Go module\n"
        f"# {K8S_MODULE}@{version}, which a {version} API server also serves at {SERVER_OPENAPI_PATH}.\n"
    )


def render(crd: Schema, version: str = K8S_VERSION) -> str:
    """The CRD as deterministic YAML, preceded by the generated-file header."""
    body = yaml.dump(crd, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1_000_000,
                     allow_unicode=True)
    return header(version) + body


# ---------------------------------------------------------------------------------------------
# Command line


def load_schemas(args: argparse.Namespace) -> dict[str, Schema]:
    """The core/v1 component schemas from the source the arguments select."""
    if args.from_server:
        return fetch_from_server(Path(args.kubeconfig), args.k8s_version)
    if args.openapi_file:
        return load_openapi_file(Path(args.openapi_file))
    return load_openapi_file(module_openapi_file(args.k8s_version))


def check(output: Path, text: str) -> int:
    """0 if `output` holds `text`; otherwise print a unified diff and return EXIT_DIFFERS."""
    try:
        current = output.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = ""
    if current == text:
        return 0
    name = _display(output)
    sys.stdout.writelines(difflib.unified_diff(
        current.splitlines(keepends=True), text.splitlines(keepends=True), f"{name} (committed)",
        f"{name} (generated)"))
    print(f"gen_crd: {name} is out of date; run `make crd`", file=sys.stderr)
    return EXIT_DIFFERS


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--openapi-file", metavar="PATH", help=f"a local copy of {MODULE_OPENAPI_FILE}")
    source.add_argument("--from-server", action="store_true",
                        help=f"fetch {SERVER_OPENAPI_PATH} from the API server of --kubeconfig")
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig for --from-server (current context)")
    parser.add_argument("--k8s-version", default=K8S_VERSION, help="Kubernetes release (default %(default)s)")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="file to write, or - for stdout")
    parser.add_argument("--check", action="store_true", help="exit 1 with a diff if --output is not up to date")
    args = parser.parse_args(argv)
    if args.from_server and not args.kubeconfig:
        parser.error("--from-server needs --kubeconfig")
    if args.check and args.output == "-":
        parser.error("--check needs a file --output")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        schemas = load_schemas(args)
    except SourceError as exc:
        print(f"gen_crd: {exc}", file=sys.stderr)
        return EXIT_SOURCE_UNAVAILABLE
    text = render(build_crd(schemas), args.k8s_version)
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    output = Path(args.output)
    if args.check:
        return check(output, text)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
