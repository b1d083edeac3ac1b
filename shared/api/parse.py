"""Parsing an MPIJob dict into the typed model, with type problems reported as field errors."""

from __future__ import annotations

import re
from typing import Any

import orjson
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


def parse_mpijob(obj: Any, *, nesting_checked: bool = False) -> tuple[MPIJob | None, list[FieldError]]:
    """The typed MPIJob, or None and one error per field of the wrong type (or one for too deep a nesting).

    ``nesting_checked``: the caller has proven that ``obj`` is nested at most MAX_NESTING levels deep (with
    ``json_nesting_within`` on the JSON text it was parsed from), so the check is not made again.
    """
    if not isinstance(obj, dict):
        return None, [fe.FieldError(fe.ErrorType.TYPE_INVALID, "<root>", obj, "must be of type object")]
    too_deep = None if nesting_checked else _too_deep(obj)
    if too_deep is not None:
        return None, [fe.forbidden(field_path(too_deep), f"must not be nested more than {MAX_NESTING} levels deep")]
    too_many = _too_many_replica_specs(obj)
    if too_many is not None:
        return None, [too_many]
    try:
        return MPIJob.model_validate(obj), []
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


_ESCAPE = re.compile(rb"\\.")
_NOT_STRUCTURE = bytes(sorted(set(range(256)) - set(b'{}[]"')))
_BRACKETS = bytes.maketrans(b"{[}]", b"(())")


def _nesting_within_limit(obj: JSONDict) -> bool:
    """True when no object or array in ``obj`` is nested MAX_NESTING levels deep or more; False when one may be.

    Anything orjson cannot encode, or encodes as a container where ``_too_deep`` sees none (tuples,
    dataclasses), can only make this False, so the exact walk decides those.
    """
    try:
        encoded = orjson.dumps(obj)
    except orjson.JSONEncodeError:  # too deep for orjson itself (254), or not JSON
        return False
    return json_nesting_within(encoded, MAX_NESTING)


def json_nesting_within(encoded: bytes, levels: int) -> bool:
    """Whether the valid JSON text ``encoded`` nests objects and arrays at most ``levels`` deep (a top-level
    object is one level, a scalar none).

    Works at C speed: with escapes and string contents removed, only the brackets remain (balanced, in valid
    JSON), and each pass of deleting ``()`` pairs removes one level.
    """
    if b"\\" in encoded:
        encoded = _ESCAPE.sub(b"", encoded)
    structure = encoded.translate(_BRACKETS, _NOT_STRUCTURE)  # the brackets, as ( and ), and the quotes
    brackets = structure.translate(None, b'"')
    if len(structure) - len(brackets) == 2 * structure.count(b'""'):
        # Every quote pairs with the next one: no string holds a bracket or quote, so all quotes can go.
        structure = brackets
    else:
        # Deleting a pair of adjacent quotes keeps every other quote's parity, so even parts stay outside strings.
        structure = b"".join(structure.replace(b'""', b"").split(b'"')[::2])
    if b"(" * (levels + 1) in structure:  # plainly too deep: spare the passes
        return False
    for passes in range(levels):
        if len(structure) <= 2 * (levels - passes):  # balanced brackets nest at most half their count deep
            return True
        structure = structure.replace(b"()", b"")
    return not structure


def _too_deep(obj: JSONDict) -> tuple[int | str, ...] | None:
    """The path of the first object or array nested deeper than MAX_NESTING, without recursion."""
    if _nesting_within_limit(obj):
        return None
    depth_stack: list[tuple[Any, int]] = [(obj, 0)]
    while depth_stack:  # cheap first pass: depths only
        node, depth = depth_stack.pop()
        if depth >= MAX_NESTING:
            break
        children = node.values() if isinstance(node, dict) else node
        depth_stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    else:
        return None
    stack: list[tuple[Any, tuple[int | str, ...]]] = [(obj, ())]
    while stack:
        node, loc = stack.pop()
        if len(loc) >= MAX_NESTING:
            return loc
        items = node.items() if isinstance(node, dict) else enumerate(node)
        stack.extend((child, (*loc, key)) for key, child in items if isinstance(child, dict | list))
    return None  # pragma: no cover  (the first pass found one)
