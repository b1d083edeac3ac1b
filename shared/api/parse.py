"""Parsing an MPIJob dict into the typed model, with type problems reported as field errors."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from shared.api import field_errors as fe
from shared.api.field_errors import FieldError
from shared.api.types import MPIJob
from shared.jsondict import JSONDict

_EXPECTED = {
    "int_type": "integer",
    "int_from_float": "integer",
    "string_type": "string",
    "bool_type": "boolean",
    "dict_type": "object",
    "model_type": "object",
    "list_type": "array",
}
_MAP_FIELDS = {"mpiReplicaSpecs", "replicaStatuses", "minResources"}
MAX_NESTING = 100
"""Deepest nesting of objects and arrays accepted. A real MPIJob (pod templates included) stays under 30
levels; the JSON encoder (254), pydantic's serializer (255) and recursive copies fail far above this."""


def parse_mpijob(obj: Any, model: type[MPIJob] = MPIJob) -> tuple[MPIJob | None, list[FieldError]]:
    """The typed MPIJob (as ``model``: ``MPIJobV2`` for kubeflow.org/v2), or None and one error per field of the
    wrong type (or one for too deep a nesting)."""
    if not isinstance(obj, dict):
        return None, [fe.FieldError(fe.ErrorType.TYPE_INVALID, "<root>", obj, "must be of type object")]
    too_deep = _too_deep(obj)
    if too_deep is not None:
        return None, [fe.forbidden(field_path(too_deep), f"must not be nested more than {MAX_NESTING} levels deep")]
    too_many = _too_many_replica_specs(obj)
    if too_many is not None:
        return None, [too_many]
    try:
        return model.model_validate(obj), []
    except ValidationError as error:
        errors = [_field_error(e["loc"], e["input"], e["type"]) for e in error.errors()[: fe.MAX_REPORTED + 1]]
        return None, fe.capped(errors, total=error.error_count())


def _field_error(loc: tuple[int | str, ...], value: Any, error_type: str) -> FieldError:
    expected = _EXPECTED.get(error_type)
    detail = f"must be of type {expected}" if expected else error_type.replace("_", " ")
    return fe.FieldError(fe.ErrorType.TYPE_INVALID, field_path(loc), value, detail)


def field_path(loc: tuple[int | str, ...]) -> str:
    """``("spec", "mpiReplicaSpecs", "Launcher", "replicas")`` -> ``spec.mpiReplicaSpecs[Launcher].replicas``."""
    path = ""
    for i, part in enumerate(loc):
        if isinstance(part, int) or (i > 0 and loc[i - 1] in _MAP_FIELDS):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


MAX_REPLICA_SPECS = 16
"""More replica types than this (only Launcher and Worker exist) are refused before the costly model parse."""


def _too_many_replica_specs(obj: JSONDict) -> FieldError | None:
    spec = obj.get("spec")
    specs = spec.get("mpiReplicaSpecs") if isinstance(spec, dict) else None
    if not isinstance(specs, dict) or len(specs) <= MAX_REPLICA_SPECS:
        return None
    return fe.FieldError(fe.ErrorType.TOO_MANY, "spec.mpiReplicaSpecs", len(specs),
                         f'must have at most {MAX_REPLICA_SPECS} items (only "Launcher" and "Worker" are used)')


_CONTAINERS = (dict, list)  # what nests (a tuple: isinstance takes it faster than the union dict | list)


def _too_deep(obj: JSONDict) -> tuple[int | str, ...] | None:
    """The path of the first object or array nested deeper than MAX_NESTING, without recursion.

    A walk level by level decides (one list per level, the common case); only a value that is too deep is
    walked again for the path its error names.
    """
    level: list[Any] = [obj]
    for _ in range(MAX_NESTING):
        level = [child for node in level for child in (node.values() if isinstance(node, dict) else node)
                 if isinstance(child, _CONTAINERS)]
        if not level:
            return None
    stack: list[tuple[Any, tuple[int | str, ...]]] = [(obj, ())]
    while stack:
        node, loc = stack.pop()
        if len(loc) >= MAX_NESTING:
            return loc
        items = node.items() if isinstance(node, dict) else enumerate(node)
        stack.extend((child, (*loc, key)) for key, child in items if isinstance(child, _CONTAINERS))
    return None  # pragma: no cover  (the walk by levels found one)
