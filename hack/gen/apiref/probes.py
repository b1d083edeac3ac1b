"""What the webhook accepts, found by asking it: defaults from shared/api's defaulting table, rules and
enums from the webhook's own admission functions, called with a valid MPIJob that has one field changed.

Nothing here restates a rule, so the reference cannot drift from what ``kubectl apply`` answers.
"""

from __future__ import annotations

import copy
import itertools
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hack.gen.apiref.shapes import Path, Shape, TypeDoc
from shared.api import constants as c
from shared.api.defaults import defaults_patch, missing_defaults
from shared.api.field_errors import ErrorType, FieldError
from shared.jsondict import JSONDict
from webhook.admission import validate_request

_CONTAINER = {"name": "main", "image": "example.com/mpi:1"}
BASE_JOB: JSONDict = {
    "apiVersion": c.API_VERSION, "kind": c.KIND, "metadata": {"name": "pi", "namespace": "default"},
    "spec": {
        "runPolicy": {"schedulingPolicy": {}},
        "mpiReplicaSpecs": {
            c.LAUNCHER: {"template": {"spec": {"containers": [_CONTAINER]}}},
            c.WORKER: {"replicas": 2, "template": {"spec": {"containers": [_CONTAINER]}}},
        },
    },
}
MAP_KEYS: dict[Path, tuple[str, ...]] = {
    ("spec", "mpiReplicaSpecs"): c.REPLICA_TYPES,
    ("status", "replicaStatuses"): c.REPLICA_TYPES,
}
_CONDITION_STATUSES = (c.CONDITION_TRUE, c.CONDITION_FALSE, c.CONDITION_UNKNOWN)
STATUS_VALUES: dict[Path, tuple[str, ...]] = {
    # Written by the controller, not admitted: the values come from the constants it writes.
    ("status", "conditions", "[]", "type"): tuple(
        value for name, value in vars(c).items()
        if name.startswith("CONDITION_") and isinstance(value, str) and value not in _CONDITION_STATUSES),
    ("status", "conditions", "[]", "status"): _CONDITION_STATUSES,
}
NAME_PROBES = ("1-pi", "pi.v2", "a" * 56)
_SUPPORTED = re.compile(r'supported values: ((?:"[^"]*"(?:, )?)+)')


@dataclass
class Facts:
    """What the reference says about one field path (``{}`` for map values)."""

    defaults: dict[str, Any] = field(default_factory=dict)  # map key ("" if none) -> value
    set_by: set[str] = field(default_factory=set)  # "webhook", "API server"
    values: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    rejected: list[str] = field(default_factory=list)  # the webhook's error lines, one per rule
    required: bool = False


def collect(docs: list[TypeDoc]) -> dict[Path, Facts]:
    facts: dict[Path, Facts] = {}
    _defaults(facts)
    for path, values in STATUS_VALUES.items():
        facts.setdefault(path, Facts()).values = values
    for path, keys in MAP_KEYS.items():
        facts.setdefault(path, Facts()).keys = keys
    for doc in docs:
        for f in doc.fields:
            if f.path[0] != "status" and f.path != ("metadata",):  # metadata: only its name has rules
                for concrete in _concrete(f.path):
                    _probe(facts.setdefault(f.path, Facts()), concrete, f.shape)
    meta = facts.setdefault(("metadata",), Facts())
    for name in NAME_PROBES:
        _record(meta, _errors(_with(BASE_JOB, ("metadata", "name"), name)), ("metadata", "name"))
    return facts


def _defaults(facts: dict[Path, Facts]) -> None:
    skeleton: JSONDict = {"spec": {"runPolicy": {}, "mpiReplicaSpecs": {t: {} for t in c.REPLICA_TYPES}}}
    patched = {op["path"] for op in defaults_patch(skeleton)}
    for path, value in missing_defaults(skeleton):
        generic, key = path, ""
        if path[:2] == ("spec", "mpiReplicaSpecs"):
            generic, key = (*path[:2], "{}", *path[3:]), path[2]
        entry = facts.setdefault(generic, Facts())
        entry.defaults[key] = value
        entry.set_by.add("webhook" if "/" + "/".join(path) in patched else "API server")


def _concrete(path: Path) -> Iterator[Path]:
    """The path with each map step replaced by every known key (Launcher, Worker)."""
    if "{}" not in path:
        yield path
        return
    i = path.index("{}")
    for key in MAP_KEYS.get(path[:i], ()):
        yield from _concrete((*path[:i], key, *path[i + 1:]))


def _probe(facts: Facts, path: Path, shape: Shape) -> None:
    unset = _errors(_without(BASE_JOB, path))
    facts.required = facts.required or any(e.type is ErrorType.REQUIRED and e.field == _field(path) for e in unset)
    if shape.kind == "object":  # errors below an object belong to its fields
        _record(facts, [e for e in unset if e.field == _field(path)], path)
        return
    _record(facts, unset, path)
    probes: tuple[Any, ...] = {"integer": (2, 0, -1, 1), "string": ("unknown", ""), "embedded": ({},)}.get(
        shape.kind, ())
    accepted = []
    for value in probes:
        errors = _errors(_with(BASE_JOB, path, value))
        _record(facts, errors, path)
        if not _at(errors, path):
            accepted.append(value)
        for error in _at(errors, path):
            found = _SUPPORTED.search(error.detail)
            if error.type is ErrorType.NOT_SUPPORTED and found:
                facts.values = tuple(re.findall(r'"([^"]*)"', found.group(1)))
    if shape.kind == "map" and path in MAP_KEYS:
        _record(facts, _errors(_with(BASE_JOB, (*path, MAP_KEYS[path][-1].lower()), {})), path)
        for key in MAP_KEYS[path]:
            _record(facts, _errors(_without(BASE_JOB, (*path, key))), path)
    candidates = list(facts.values) or accepted
    if len(candidates) >= 2:
        old, new = _with(BASE_JOB, path, candidates[0]), _with(BASE_JOB, path, candidates[1])
        _record(facts, _errors(new, old), path)


def _errors(obj: JSONDict, old: JSONDict | None = None) -> list[FieldError]:
    """The webhook's errors for a CREATE of ``obj``, or an UPDATE from ``old``."""
    request: JSONDict = {"uid": str(uuid.UUID(int=0)), "operation": "UPDATE" if old else "CREATE", "object": obj,
                         "kind": {"group": c.GROUP, "version": c.VERSION, "kind": c.KIND}}
    if old is not None:
        request["oldObject"] = old
    return validate_request(request).errors


def _field(path: Path) -> str:
    text = path[0]
    for prev, step in itertools.pairwise(path):
        text += f"[{step}]" if prev == "mpiReplicaSpecs" else f".{step}"
    return text


def _at(errors: list[FieldError], path: Path) -> list[FieldError]:
    prefix = _field(path)
    return [e for e in errors if e.field == prefix or e.field.startswith((prefix + ".", prefix + "["))]


def _record(facts: Facts, errors: list[FieldError], path: Path) -> None:
    """Keep one error line per rule (field, kind and detail; the probe value does not make a new rule)."""
    seen = {_rule(line) for line in facts.rejected}
    for error in _at(errors, path):
        line = str(error)
        if _rule(line) not in seen:
            seen.add(_rule(line))
            facts.rejected.append(line)


def _rule(line: str) -> str:
    field_path, _, body = line.partition(": ")
    kind, _, rest = body.partition(": ")
    if kind in ("Invalid value", "Unsupported value"):
        rest = rest.partition(": ")[2] or rest
    return f"{field_path}|{kind}|{rest}"


def _with(obj: JSONDict, path: Path, value: Any) -> JSONDict:
    result = copy.deepcopy(obj)
    target = result
    for step in path[:-1]:
        target = target.setdefault(step, {})
    target[path[-1]] = value
    return result


def _without(obj: JSONDict, path: Path) -> JSONDict:
    result = copy.deepcopy(obj)
    target = result
    for step in path[:-1]:
        target = target.get(step, {})
    target.pop(path[-1], None)
    return result
