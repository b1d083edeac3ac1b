"""Pydantic models of kubeflow.org/v2 MPIJob: v2beta1 plus ``spec.runPolicy.failurePolicy``, and the one description
of that field's schema as JSON types and defaults.

Everything else is v2beta1's model (docs/proposals/v2.md, "What stays identical"); the v2 models subclass it,
so every function that takes an ``MPIJob`` takes an ``MPIJobV2`` as well. ``FAILURE_POLICY_JSON_TYPES`` is read
from the models and ``FAILURE_POLICY_DEFAULTS`` from the fields that declare a schema default: the lift of the
annotation checks types against the first, and policies are defaulted with the second. The CRD generator
(hack/gen/crdgen/v2_schema.py) is checked against both by tests/unit/test_failure_policy.py, and against the models
by hack/gen/api_reference.py.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, Field

from shared.api import constants as c
from shared.api.types import MPIJob, MPIJobSpec, RunPolicy, _Model
from shared.jsondict import JSONDict

# The key of a field's schema default in its json_schema_extra. The model's own default stays None: a field
# the client left out is absent, not the value the API server would have given it.
SCHEMA_DEFAULT = "schemaDefault"


class PodConditionPattern(_Model):
    type: str | None = None
    status: str | None = Field(default=None, json_schema_extra={SCHEMA_DEFAULT: c.CONDITION_TRUE})


class ExitCodesRequirement(_Model):
    container_name: str | None = None
    operator: str | None = None
    values: list[int] | None = None


class FailurePolicyRule(_Model):
    name: str | None = None
    action: str | None = None
    on_replica_types: list[str] | None = None
    on_pod_conditions: list[PodConditionPattern] | None = None
    on_exit_codes: ExitCodesRequirement | None = None


class FailurePolicy(_Model):
    max_restarts: int | None = None
    rules: list[FailurePolicyRule] | None = None


class RunPolicyV2(RunPolicy):
    failure_policy: FailurePolicy | None = None


class MPIJobSpecV2(MPIJobSpec):
    run_policy: RunPolicyV2 | None = None


class MPIJobV2(MPIJob):
    api_version: str | None = c.API_VERSION_V2
    spec: MPIJobSpecV2 | None = None

    @property
    def failure_policy(self) -> FailurePolicy | None:
        run_policy = self.spec.run_policy if self.spec else None
        return run_policy.failure_policy if run_policy else None


# JSON types: a dict is an object with these optional properties, a one-element list an array of that item type.
JSON_INTEGER, JSON_STRING = "integer", "string"
_JSON_SCALARS: dict[Any, str] = {int: JSON_INTEGER, str: JSON_STRING}


def json_types(model: type[BaseModel]) -> JSONDict:
    """The JSON types of ``model``'s fields by wire name."""
    return {info.alias or name: _json_type(info.annotation) for name, info in model.model_fields.items()}


def schema_defaults(model: type[BaseModel]) -> JSONDict:
    """The schema defaults inside ``model``, in the shape of ``json_types``: a string is the default of an absent
    property; objects and arrays without a default inside are left out."""
    found: JSONDict = {}
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        default = extra.get(SCHEMA_DEFAULT) or _defaults_inside(info.annotation)
        if default:
            found[info.alias or name] = default
    return found


def _json_type(annotation: Any) -> Any:
    inner = _without_none(annotation)
    if typing.get_origin(inner) is list:
        return [_json_type(typing.get_args(inner)[0])]
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return json_types(inner)
    return _JSON_SCALARS[inner]


def _defaults_inside(annotation: Any) -> Any:
    inner = _without_none(annotation)
    if typing.get_origin(inner) is list:
        item = _defaults_inside(typing.get_args(inner)[0])
        return [item] if item else None
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return schema_defaults(inner)
    return None


def _without_none(annotation: Any) -> Any:
    """``X`` of ``X | None``."""
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    is_optional = typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1
    return args[0] if is_optional else annotation


FAILURE_POLICY_JSON_TYPES = json_types(FailurePolicy)
FAILURE_POLICY_DEFAULTS = schema_defaults(FailurePolicy)


def with_failure_policy_defaults(policy: JSONDict) -> JSONDict:
    """A copy of ``policy`` with the v2 schema's defaults where a field is absent (or null), as the API server sets
    them on a v2 request: what the policy means. Policies are compared, and made canonical, in this form."""
    defaulted: JSONDict = _defaulted(policy, FAILURE_POLICY_DEFAULTS)
    return defaulted


def _defaulted(value: Any, defaults: Any) -> Any:
    if isinstance(defaults, list):
        return [_defaulted(item, defaults[0]) for item in value] if isinstance(value, list) else value
    if not isinstance(value, dict):
        return value
    result = dict(value)
    for key, default in defaults.items():
        if isinstance(default, str):
            result[key] = default if result.get(key) is None else result[key]
        elif key in result:
            result[key] = _defaulted(result[key], default)
    return result


def has_json_types(value: Any, json_type: Any = FAILURE_POLICY_JSON_TYPES) -> bool:
    """Whether ``value`` holds only the properties ``json_type`` knows, each of its JSON type (a bool is no
    integer)."""
    if json_type == JSON_INTEGER:
        return isinstance(value, int) and not isinstance(value, bool)
    if json_type == JSON_STRING:
        return isinstance(value, str)
    if isinstance(json_type, list):
        return isinstance(value, list) and all(has_json_types(item, json_type[0]) for item in value)
    return (isinstance(value, dict)
            and all(key in json_type and has_json_types(item, json_type[key]) for key, item in value.items()))
