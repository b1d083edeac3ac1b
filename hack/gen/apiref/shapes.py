"""The MPIJob types as the pydantic models declare them, and their comparison with the CRD schema.

A path is a tuple of JSON names from the MPIJob root; ``{}`` steps into a map's values, ``[]`` into a
list's items (as in tests/unit/test_crd.py). The core Kubernetes types the models keep as plain dicts
(``EMBEDDED``) are not expanded: the reference links to the Kubernetes documentation instead.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from shared.api.types import MPIJob

Path = tuple[str, ...]
Schema = dict[str, Any]

K8S_API = "https://kubernetes.io/docs/reference/kubernetes-api"
EMBEDDED: dict[Path, tuple[str, str]] = {
    ("metadata",): ("ObjectMeta", f"{K8S_API}/common-definitions/object-meta/#ObjectMeta"),
    ("spec", "mpiReplicaSpecs", "{}", "template"): (
        "PodTemplateSpec", f"{K8S_API}/workload-resources/pod-template-v1/#PodTemplateSpec"),
    ("status", "replicaStatuses", "{}", "labelSelector"): (
        "LabelSelector", f"{K8S_API}/common-definitions/label-selector/#LabelSelector"),
}


@dataclass(frozen=True)
class Shape:
    """The JSON shape of a field: a scalar kind, a model (object), a map or list of shapes, or a core type."""

    kind: str  # integer | string | boolean | int-or-string | object | map | array | embedded
    model: type[BaseModel] | None = None
    item: Shape | None = None
    embedded: tuple[str, str] | None = None  # (core type name, documentation URL)


@dataclass(frozen=True)
class Field:
    path: Path
    name: str
    shape: Shape
    required: bool


@dataclass
class TypeDoc:
    """One model and the first path where it appears."""

    model: type[BaseModel]
    path: Path
    fields: list[Field] = field(default_factory=list)


def shape_of(annotation: Any, path: Path) -> Shape:
    """The shape of a model field's annotation; an unknown annotation is an error, never a guess."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        if sorted(a.__name__ for a in args) == ["int", "str"]:
            return Shape("int-or-string")
        if len(args) == 1:
            return shape_of(args[0], path)
    elif origin is dict and args[1] is Any:
        if path not in EMBEDDED:
            raise ValueError(f"{'.'.join(path)}: a plain dict field needs an entry in EMBEDDED")
        return Shape("embedded", embedded=EMBEDDED[path])
    elif origin is dict:
        return Shape("map", item=shape_of(args[1], (*path, "{}")))
    elif origin is list:
        return Shape("array", item=shape_of(args[0], (*path, "[]")))
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return Shape("object", model=annotation)
    scalars = {int: "integer", str: "string", bool: "boolean"}
    if annotation in scalars:
        return Shape(scalars[annotation])
    raise ValueError(f"{'.'.join(path)}: unsupported annotation {annotation!r}")


def model_fields(model: type[BaseModel], path: Path) -> list[Field]:
    fields = []
    for name, info in model.model_fields.items():
        json_name = info.alias or name
        fields.append(Field((*path, json_name), json_name, shape_of(info.annotation, (*path, json_name)),
                            info.is_required()))
    return fields


def type_docs(root: type[BaseModel] = MPIJob) -> list[TypeDoc]:
    """Every model reachable from ``root``, depth first in field order, each with its fields."""
    docs: list[TypeDoc] = []

    def visit(model: type[BaseModel], path: Path) -> None:
        if any(doc.model is model for doc in docs):
            return
        doc = TypeDoc(model, path, model_fields(model, path))
        docs.append(doc)
        for f in doc.fields:
            shape, sub = f.shape, f.path
            while shape.item is not None:
                sub = (*sub, "{}" if shape.kind == "map" else "[]")
                shape = shape.item
            if shape.model is not None:
                visit(shape.model, sub)

    visit(root, ())
    return docs


def crd_node(schema: Schema, path: Path) -> Schema | None:
    """The CRD schema node at a path, or None."""
    node: Any = schema
    for step in path:
        if step == "{}":
            node = node.get("additionalProperties")
        elif step == "[]":
            node = node.get("items")
        else:
            node = node.get("properties", {}).get(step)
        if not isinstance(node, dict):
            return None
    return typing.cast(Schema, node)


def mismatches(schema: Schema, root: type[BaseModel] = MPIJob) -> list[str]:
    """Where the models and the CRD's openAPIV3Schema disagree: names, types, both ways."""
    return _compare(Shape("object", model=root), schema, ())


def _compare(shape: Shape, node: Schema, path: Path) -> list[str]:
    where = ".".join(path) or "<root>"
    expected = {"integer": "integer", "string": "string", "boolean": "boolean", "array": "array"}.get(shape.kind,
                                                                                                  "object")
    if shape.kind == "int-or-string":
        ok = node.get("x-kubernetes-int-or-string") is True
        return [] if ok else [f"{where}: the model says integer or string, the CRD {node.get('type')}"]
    if node.get("type") != expected:
        return [f"{where}: the model says {shape.kind}, the CRD {node.get('type')}"]
    if shape.kind in ("integer", "string", "boolean", "embedded"):
        return []  # for a core type, the CRD carries Kubernetes' own schema
    if shape.kind in ("map", "array"):
        key = "additionalProperties" if shape.kind == "map" else "items"
        sub = node.get(key)
        assert shape.item is not None
        if not isinstance(sub, dict):
            return [f"{where}: the model says {shape.kind}, the CRD has no {key}"]
        return _compare(shape.item, sub, (*path, "{}" if shape.kind == "map" else "[]"))
    assert shape.model is not None
    fields = {f.name: f for f in model_fields(shape.model, path)}
    properties: Schema = node.get("properties", {})
    problems = [f"{where}.{name}: in the CRD, not in the model {shape.model.__name__}"
                for name in sorted(set(properties) - set(fields))]
    problems += [f"{where}.{name}: in the model {shape.model.__name__}, not in the CRD"
                 for name in sorted(set(fields) - set(properties))]
    for name in sorted(set(fields) & set(properties)):
        problems += _compare(fields[name].shape, properties[name], (*path, name))
    return problems
