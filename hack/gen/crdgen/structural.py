"""Converting OpenAPI v3 component schemas into a structural CRD schema (no $ref, every node typed)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

Schema = dict[str, Any]

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




def int_or_string(pattern: str | None = None, description: str | None = None) -> Schema:
    """controller-gen's schema for IntOrString, or for Quantity when given the quantity pattern."""
    node: Schema = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
    if pattern:
        node["pattern"] = pattern
    if description:
        node["description"] = description
    return sorted_schema(node)


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
        return sorted_schema(out)


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


def sorted_schema(node: Schema) -> Schema:
    """Schema keys in alphabetical order, as controller-gen writes them."""
    return dict(sorted(node.items()))


def field(type_: str, description: str | None, **extra: Any) -> Schema:
    """A schema node of `type_`; `extra` holds format, default, enum and the like."""
    node: Schema = {"type": type_, **extra}
    if description:
        node["description"] = description
    return sorted_schema(node)
