"""Pydantic models of kubeflow.org/v2 MPIJob: v2beta1 plus ``spec.runPolicy.failurePolicy`` and ``spec.workerBackend``,
the one description of those fields' schema.

Everything else is v2beta1's model (docs/proposals/v2.md, "What stays identical"), which the v2 models subclass. The
failurePolicy models' ``Api`` metadata and CEL ``Rule``s are what hack/gen/crdgen/v2_schema.py writes into the CRD and
failure_policy_validation.py checks (the models themselves check only JSON types); the annotation's lift checks JSON
types, and defaulting sets defaults, by that schema (``FAILURE_POLICY_SCHEMA``).
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel

from shared.api import constants as c
from shared.api.types import MPIJob, MPIJobSpec, RunPolicy, _Model
from shared.api.worker_backend import WORKER_BACKENDS
from shared.jsondict import JSONDict


@dataclass(frozen=True)
class Rule:
    """A CEL rule (x-kubernetes-validations): the API server denies with ``message`` when ``rule`` is false."""

    rule: str
    message: str


@dataclass(frozen=True)
class Api:
    """What the v2 CRD schema says of a field besides its JSON type; ``items``: of an array's items."""

    description: str | None = None
    required: bool = False
    format: str | None = None
    default: str | None = None
    enum: tuple[str, ...] = ()
    minimum: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    min_items: int | None = None
    max_items: int | None = None
    list_type: str | None = None
    map_keys: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    items: Api | None = None


def api(model: type[BaseModel], name: str) -> Api:
    """What the schema says of ``model``'s field ``name`` (its Python name)."""
    return next((meta for meta in model.model_fields[name].metadata if isinstance(meta, Api)), Api())


class _V2Model(_Model):
    CEL: ClassVar[tuple[Rule, ...]] = ()  # the object's own CEL rules


MAX_RESTARTS_REQUIRED = Rule(f"has(self.maxRestarts) || !self.rules.exists(r, r.action == '{c.ACTION_RESTART_JOB}')",
                             "maxRestarts is required with a RestartJob rule")
ONE_MATCHER = Rule("has(self.onPodConditions) != has(self.onExitCodes)",
                   "exactly one of onPodConditions and onExitCodes is required")
SORTED_EXIT_CODES = Rule("self.isSorted()", "values must be sorted ascending")
NO_ZERO_WITH_IN = Rule(f"self.operator != '{c.EXIT_CODES_IN}' || !(0 in self.values)",
                       "0 is not allowed with the In operator")


class PodConditionPattern(_V2Model):
    """PodConditionPattern matches a pod condition by type and status."""

    type: Annotated[str | None, Api("The pod condition type, e.g. DisruptionTarget.", required=True,
                                    max_length=316)] = None
    status: Annotated[str | None, Api("The condition's status. Defaults to True.", default=c.CONDITION_TRUE,
                                      enum=c.CONDITION_STATUSES)] = None


class ExitCodesRequirement(_V2Model):
    """ExitCodesRequirement matches a pod by the exit codes of its terminated containers (batch/v1's
    PodFailurePolicyOnExitCodesRequirement); exit code 0 is ignored."""

    CEL = (NO_ZERO_WITH_IN,)
    container_name: Annotated[str | None, Api("Only this container's exit code; every container's when unset.",
                                              max_length=63)] = None
    operator: Annotated[str | None, Api("In: one exit code is in values; NotIn: one is not.", required=True,
                                        enum=c.EXIT_CODES_OPERATORS)] = None
    values: Annotated[list[int] | None, Api("Exit codes, sorted ascending.", required=True, min_items=1,
                                            max_items=255, list_type="set", rules=(SORTED_EXIT_CODES,),
                                            items=Api(format="int32"))] = None


class FailurePolicyRule(_V2Model):
    """FailurePolicyRule matches failed pods by replica type and by pod condition or container exit codes."""

    CEL = (ONE_MATCHER,)
    name: Annotated[str | None, Api("The rule's name, unique in the policy; shown in the condition and event.",
                                    required=True, max_length=63,
                                    pattern="^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")] = None
    action: Annotated[str | None, Api("RestartJob deletes the launcher Job and every worker and recreates them (the "
                                      "SSH Secret is kept); FailJob fails the job.", required=True,
                                      enum=c.FAILURE_POLICY_ACTIONS)] = None
    on_replica_types: Annotated[list[str] | None, Api("The replica types whose pods the rule matches; both when "
                                                      "unset.", min_items=1, max_items=2, list_type="set",
                                                      items=Api(enum=c.REPLICA_TYPES))] = None
    on_pod_conditions: Annotated[list[PodConditionPattern] | None, Api(
        "Matches a pod that has one of these conditions, e.g. DisruptionTarget (eviction, preemption, a lost node).",
        min_items=1, max_items=20)] = None
    on_exit_codes: ExitCodesRequirement | None = None


class FailurePolicy(_V2Model):
    """FailurePolicy restarts or fails the job when a launcher or worker pod fails in a way a rule matches.
    Immutable. Without it a failed pod is handled as in kubeflow.org/v2beta1."""

    CEL = (MAX_RESTARTS_REQUIRED,)
    max_restarts: Annotated[int | None, Api("How many times RestartJob rules may restart the job; once reached, a "
                                            "RestartJob rule fails it. Required with a RestartJob rule.",
                                            format="int32", minimum=0)] = None
    rules: Annotated[list[FailurePolicyRule] | None, Api("Rules tried in order; the first one a failed pod matches "
                                                         "decides.", required=True, min_items=1, max_items=20,
                                                         list_type="map", map_keys=("name",))] = None


class RunPolicyV2(RunPolicy):
    failure_policy: FailurePolicy | None = None


# On spec (a rule on the field itself would not run when the field is added or removed): the backend a job was
# created with is the one it keeps. ``fieldPath`` makes the API server name the field.
WORKER_BACKEND_IMMUTABLE = Rule("has(self.workerBackend) == has(oldSelf.workerBackend) && "
                                "(!has(self.workerBackend) || self.workerBackend == oldSelf.workerBackend)",
                                "workerBackend is immutable")


class MPIJobSpecV2(MPIJobSpec):
    run_policy: RunPolicyV2 | None = None
    worker_backend: Annotated[str | None, Api(
        "How the workers run. Pods: the operator creates each worker pod, named NAME-worker-INDEX after the job (as "
        "in kubeflow.org/v2beta1). IndexedJob: one Indexed batch/v1 Job NAME-worker, whose pods the Job controller "
        "creates: they keep the hostnames NAME-worker-INDEX but their names get a random suffix, so a worker is "
        "found by its labels (kubectl logs -l training.kubeflow.org/job-name=NAME,"
        "batch.kubernetes.io/job-completion-index=INDEX). Unset: the operator's --default-worker-backend. "
        "Immutable: cannot be set, changed or removed after creation.", enum=WORKER_BACKENDS)] = None


class MPIJobV2(MPIJob):
    api_version: str | None = c.API_VERSION_V2
    spec: MPIJobSpecV2 | None = None

    @property
    def failure_policy(self) -> FailurePolicy | None:
        run_policy = self.spec.run_policy if self.spec else None
        return run_policy.failure_policy if run_policy else None

    @property
    def worker_backend(self) -> str | None:
        return self.spec.worker_backend if self.spec else None


# The OpenAPI keyword of each Api field.
_KEYWORDS = {"description": "description", "format": "format", "default": "default", "enum": "enum",
             "minimum": "minimum", "max_length": "maxLength", "pattern": "pattern", "min_items": "minItems",
             "max_items": "maxItems", "list_type": "x-kubernetes-list-type", "map_keys": "x-kubernetes-list-map-keys"}
_JSON_SCALARS: dict[Any, str] = {int: "integer", str: "string"}


def _object_schema(model: type[BaseModel]) -> JSONDict:
    """The OpenAPI schema of a v2 model: its docstring, its fields by wire name with their type and ``Api``, and its
    CEL rules."""
    fields = {info.alias or name: (info.annotation, api(model, name)) for name, info in model.model_fields.items()}
    node = {"type": "object", "description": " ".join((model.__doc__ or "").split()),
            "properties": {wire: _field_schema(annotation, meta) for wire, (annotation, meta) in fields.items()}}
    required = [wire for wire, (_, meta) in fields.items() if meta.required]
    return node | ({"required": required} if required else {}) | _cel(getattr(model, "CEL", ()))


def _field_schema(annotation: Any, meta: Api) -> JSONDict:
    keywords = {key: list(value) if isinstance(value, tuple) else value for attr, key in _KEYWORDS.items()
                if (value := getattr(meta, attr)) not in (None, ())} | _cel(meta.rules)
    inner = _without_none(annotation)
    if typing.get_origin(inner) is list:
        return {"type": "array", "items": _field_schema(typing.get_args(inner)[0], meta.items or Api()), **keywords}
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return _object_schema(inner) | keywords
    return {"type": _JSON_SCALARS[inner], **keywords}


def _cel(rules: tuple[Rule, ...]) -> JSONDict:
    return {"x-kubernetes-validations": [{"message": r.message, "rule": r.rule} for r in rules]} if rules else {}


def _without_none(annotation: Any) -> Any:
    """``X`` of ``X | None``."""
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    is_optional = typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1
    return args[0] if is_optional else annotation


# failurePolicy's and workerBackend's schemas as the v2 CRD holds them (hack/gen/crdgen/v2_schema.py sorts keys).
FAILURE_POLICY_SCHEMA = _object_schema(FailurePolicy)
WORKER_BACKEND_SCHEMA = _field_schema(MPIJobSpecV2.model_fields["worker_backend"].annotation,
                                      api(MPIJobSpecV2, "worker_backend"))


def with_failure_policy_defaults(policy: JSONDict) -> JSONDict:
    """A copy of ``policy`` with the v2 schema's defaults where a field is absent (or null), as the API server sets
    them on a v2 request: what the policy means. Policies are compared, and made canonical, in this form."""
    defaulted: JSONDict = _defaulted(policy, FAILURE_POLICY_SCHEMA)
    return defaulted


def _defaulted(value: Any, node: JSONDict) -> Any:
    if node["type"] == "array":
        return [_defaulted(item, node["items"]) for item in value] if isinstance(value, list) else value
    if node["type"] != "object" or not isinstance(value, dict):
        return value
    result = dict(value)
    for key, sub in node["properties"].items():
        if result.get(key) is None and "default" in sub:
            result[key] = sub["default"]
        elif key in result:
            result[key] = _defaulted(result[key], sub)
    return result


def has_json_types(value: Any, node: JSONDict = FAILURE_POLICY_SCHEMA) -> bool:
    """Whether ``value`` holds only the properties the schema ``node`` knows, each of its JSON type (a bool is no
    integer)."""
    if node["type"] == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if node["type"] == "string":
        return isinstance(value, str)
    if node["type"] == "array":
        return isinstance(value, list) and all(has_json_types(item, node["items"]) for item in value)
    properties = node["properties"]
    return (isinstance(value, dict)
            and all(key in properties and has_json_types(item, properties[key]) for key, item in value.items()))
