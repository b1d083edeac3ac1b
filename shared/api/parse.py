"""Parsing an MPIJob dict into the typed model, with type problems reported as field errors."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from shared.api import field_errors as fe
from shared.api.field_errors import FieldError
from shared.api.types import MPIJob

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


def parse_mpijob(obj: Any) -> tuple[MPIJob | None, list[FieldError]]:
    """The typed MPIJob, or None and one error per field of the wrong type."""
    if not isinstance(obj, dict):
        return None, [fe.FieldError(fe.ErrorType.TYPE_INVALID, "<root>", obj, "must be of type object")]
    try:
        return MPIJob.model_validate(obj), []
    except ValidationError as error:
        return None, [_field_error(e["loc"], e["input"], e["type"]) for e in error.errors()]


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
