"""Validation of kubeflow.org/v2's ``spec.runPolicy.failurePolicy`` and of its v2beta1 form, the annotation.

The rules are those of the v2 CRD schema (enums, limits, CEL rules; docs/proposals/v2.md, "Schema") with
Kubernetes-style field paths, so that the webhook reports them where the API server would.
"""

from __future__ import annotations

import re
from dataclasses import replace

from shared.api import constants as c
from shared.api import dns
from shared.api import field_errors as fe
from shared.api.conversion import (
    ConversionError,
    canonical_json,
    lifted_failure_policy,
    parse_annotation,
    to_v2beta1,
    with_failure_policy_defaults,
)
from shared.api.field_errors import FieldError
from shared.api.types import MPIJob
from shared.api.v2types import ExitCodesRequirement, FailurePolicy, FailurePolicyRule, MPIJobV2, PodConditionPattern
from shared.jsondict import JSONDict

PATH = "spec.runPolicy.failurePolicy"
ANNOTATION_PATH = f"metadata.annotations[{c.V2_SPEC_ANNOTATION}]"
INT32_MAX = 2**31 - 1
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # bytes of keys and values: apimachinery's TotalAnnotationSizeLimitB
_RULE_NAME = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?").fullmatch
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]").fullmatch


def v2_errors(job: MPIJobV2) -> list[FieldError]:
    """The v2-only errors of a v2 MPIJob: its failurePolicy, and the reserved annotation set by a v2 client."""
    errors: list[FieldError] = []
    annotations = job.metadata.get("annotations")
    if isinstance(annotations, dict) and c.V2_SPEC_ANNOTATION in annotations:
        errors.append(fe.forbidden(ANNOTATION_PATH, f"is reserved for storing v2 fields in {c.API_VERSION}; "
                                                    "set spec.runPolicy.failurePolicy instead"))
    policy = job.failure_policy
    return errors + (failure_policy_errors(policy) if policy is not None else [])


def failure_policy_update_errors(old: JSONDict | None, new: JSONDict | None, path: str = PATH) -> list[FieldError]:
    """The failurePolicy is immutable: it cannot be added, changed or removed after creation. Policies are compared
    with the v2 defaults applied: a stored policy converted to v2 lacks the defaults the API server gave the request
    (a v2beta1 client may leave a pod condition's status out), and that is no change."""
    if _meaning(old) == _meaning(new):
        return []
    return [fe.invalid(path, new, "field is immutable")]


def _meaning(policy: JSONDict | None) -> JSONDict | None:
    return with_failure_policy_defaults(policy) if policy is not None else None


def annotation_errors(obj: JSONDict) -> list[FieldError]:
    """Errors of a v2beta1 object's annotation: a value that is not a failurePolicy, or an invalid one."""
    value = annotation_value(obj)
    if value is None:
        return []
    policy = parse_annotation(value) if isinstance(value, str) else None
    spec = obj.get("spec")
    run_policy = spec.get("runPolicy") if isinstance(spec, dict) else None
    if policy is None or not isinstance(run_policy, dict):
        detail = ('must be JSON of {"spec":{"runPolicy":{"failurePolicy":{...}}}} with only fields of '
                  f"{c.API_VERSION_V2}, on an MPIJob with spec.runPolicy")
        return [fe.invalid(ANNOTATION_PATH, _shown(value), detail)]
    # Errors inside the value name their path in it: metadata.annotations[...].spec.runPolicy.failurePolicy...
    errors = failure_policy_errors(FailurePolicy.model_validate(policy))
    return [replace(error, field=f"{ANNOTATION_PATH}.{error.field}") for error in errors]


def _shown(value: object) -> object:
    """A short value as it is; a long one (the annotation may hold 256 KiB) described by its size."""
    if isinstance(value, str) and len(value) > 80:
        return f"<{len(value)} characters>"
    return value if isinstance(value, str | int | bool) or value is None else f"<{type(value).__name__}>"


def annotation_value(obj: JSONDict) -> object:
    """The annotation's value (of any type), or None when the object has none."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return annotations.get(c.V2_SPEC_ANNOTATION) if isinstance(annotations, dict) else None


def canonical_annotation(obj: JSONDict) -> str | None:
    """The canonical form of a valid annotation value, with the v2 defaults applied (so that the stored policy is
    the one a v2 client reads and writes back), for the mutating webhook; None when it is already in that form or
    is not valid."""
    value = annotation_value(obj)
    policy = parse_annotation(value) if isinstance(value, str) else None
    if policy is None or annotation_errors(obj):
        return None
    canonical = canonical_json({"spec": {"runPolicy": {"failurePolicy": with_failure_policy_defaults(policy)}}})
    return canonical if canonical != value else None


def annotated_failure_policy(obj: JSONDict) -> JSONDict | None:
    """The failurePolicy a v2beta1 object's annotation holds, canonical or not (as ``annotation_errors`` accepts
    it), on an object whose ``spec.runPolicy`` is an object; else None. What the reconciler runs a job with:
    only conversion requires the canonical form (``lifted_failure_policy``)."""
    value = annotation_value(obj)
    spec = obj.get("spec")
    run_policy = spec.get("runPolicy") if isinstance(spec, dict) else None
    return parse_annotation(value) if isinstance(value, str) and isinstance(run_policy, dict) else None


def annotation_warnings(obj: JSONDict) -> list[str]:
    """A warning for a valid annotation that conversion cannot lift (it is not canonical JSON: the mutating webhook,
    which makes it canonical, did not run): the job runs with its policy, but kubeflow.org/v2 clients see the
    annotation instead of spec.runPolicy.failurePolicy."""
    if annotated_failure_policy(obj) is None or lifted_failure_policy(obj) is not None or annotation_errors(obj):
        return []
    return [f"{ANNOTATION_PATH}: is not canonical JSON (keys sorted, no spaces), so {c.API_VERSION_V2} clients see "
            "this annotation instead of spec.runPolicy.failurePolicy; the job runs with the policy it holds"]


def stored_failure_policy(obj: JSONDict) -> JSONDict | None:
    """The failurePolicy of a v2beta1 object as the webhook compares it on updates: lifted if liftable."""
    return lifted_failure_policy(obj)


def failure_policy_errors(policy: FailurePolicy, path: str = PATH) -> list[FieldError]:
    """Every error of one failurePolicy, in the order of its fields."""
    errors: list[FieldError] = []
    if policy.max_restarts is not None:
        errors += _range_errors(f"{path}.maxRestarts", policy.max_restarts)
    rules = policy.rules
    if not rules:
        return [*errors, fe.required(f"{path}.rules", "must have at least one rule")]
    if len(rules) > c.MAX_FAILURE_POLICY_RULES:
        errors.append(_too_many(f"{path}.rules", len(rules), c.MAX_FAILURE_POLICY_RULES))
    seen: set[str] = set()
    for i, rule in enumerate(rules):
        errors += _rule_errors(rule, f"{path}.rules[{i}]", seen)
    if policy.max_restarts is None and any(rule.action == c.ACTION_RESTART_JOB for rule in rules):
        errors.append(fe.required(f"{path}.maxRestarts", "maxRestarts is required with a RestartJob rule"))
    return errors


def _range_errors(path: str, value: int) -> list[FieldError]:
    if value < 0:
        return [fe.invalid(path, value, "must be greater than or equal to 0", "minimum")]
    if value > INT32_MAX:
        return [fe.invalid(path, value, f"must be less than or equal to {INT32_MAX}", "maximum")]
    return []


def _too_many(path: str, count: int, limit: int) -> FieldError:
    return FieldError(fe.ErrorType.TOO_MANY, path, count, f"must have at most {limit} items")


def _rule_errors(rule: FailurePolicyRule, path: str, seen: set[str]) -> list[FieldError]:
    errors = _rule_name_errors(rule.name, f"{path}.name", seen)
    if rule.action is None:
        errors.append(fe.required(f"{path}.action", ""))
    elif rule.action not in c.FAILURE_POLICY_ACTIONS:
        errors.append(fe.not_supported(f"{path}.action", rule.action, c.FAILURE_POLICY_ACTIONS))
    errors += _replica_types_errors(rule.on_replica_types, f"{path}.onReplicaTypes")
    if (rule.on_pod_conditions is None) == (rule.on_exit_codes is None):
        errors.append(fe.invalid(path, None, "exactly one of onPodConditions and onExitCodes is required"))
    if rule.on_pod_conditions is not None:
        errors += _pod_conditions_errors(rule.on_pod_conditions, f"{path}.onPodConditions")
    if rule.on_exit_codes is not None:
        errors += _exit_codes_errors(rule.on_exit_codes, f"{path}.onExitCodes")
    return errors


def _rule_name_errors(name: str | None, path: str, seen: set[str]) -> list[FieldError]:
    if not name:
        return [fe.required(path, "")]
    if name in seen:
        return [FieldError(fe.ErrorType.DUPLICATE, path, name)]
    seen.add(name)
    if len(name) > c.MAX_RULE_NAME_LENGTH:
        return [FieldError(fe.ErrorType.TOO_LONG, path, name, f"may not be more than {c.MAX_RULE_NAME_LENGTH} bytes")]
    if not _RULE_NAME(name):
        detail = "must start with a letter and contain only letters, digits, '_', ',' and ':', ending in neither"
        return [fe.invalid(path, name, detail)]
    return []


def _replica_types_errors(types: list[str] | None, path: str) -> list[FieldError]:
    if types is None:
        return []
    if not types:
        return [fe.required(path, "must have at least one replica type when set")]
    errors = [fe.not_supported(f"{path}[{i}]", t, c.REPLICA_TYPES) for i, t in enumerate(types)
              if t not in c.REPLICA_TYPES]
    errors += [FieldError(fe.ErrorType.DUPLICATE, f"{path}[{i}]", t) for i, t in enumerate(types) if t in types[:i]]
    return errors


def _pod_conditions_errors(patterns: list[PodConditionPattern], path: str) -> list[FieldError]:
    if not patterns:
        return [fe.required(path, "must have at least one pattern when set")]
    errors = [] if len(patterns) <= c.MAX_POD_CONDITION_PATTERNS else [
        _too_many(path, len(patterns), c.MAX_POD_CONDITION_PATTERNS)]
    for i, pattern in enumerate(patterns):
        if not pattern.type:
            errors.append(fe.required(f"{path}[{i}].type", ""))
        elif not _is_qualified_name(pattern.type):
            errors.append(fe.invalid(f"{path}[{i}].type", pattern.type, "must be a qualified name"))
        if pattern.status is not None and pattern.status not in c.CONDITION_STATUSES:
            errors.append(fe.not_supported(f"{path}[{i}].status", pattern.status, c.CONDITION_STATUSES))
    return errors


def _is_qualified_name(value: str) -> bool:
    prefix, _, name = value.rpartition("/")
    if "/" in value and (not prefix or dns.is_dns1123_subdomain(prefix)):
        return False
    return len(name) <= dns.DNS1123_LABEL_MAX and bool(_QUALIFIED_NAME(name))


def _exit_codes_errors(requirement: ExitCodesRequirement, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    name = requirement.container_name
    if name is not None:
        errors += [fe.invalid(f"{path}.containerName", name, problem) for problem in dns.is_dns1123_label(name)]
    if requirement.operator is None:
        errors.append(fe.required(f"{path}.operator", ""))
    elif requirement.operator not in c.EXIT_CODES_OPERATORS:
        errors.append(fe.not_supported(f"{path}.operator", requirement.operator, c.EXIT_CODES_OPERATORS))
    return errors + _exit_code_values_errors(requirement, f"{path}.values")


def _exit_code_values_errors(requirement: ExitCodesRequirement, path: str) -> list[FieldError]:
    values = requirement.values
    if not values:
        return [fe.required(path, "must have at least one exit code")]
    errors = [] if len(values) <= c.MAX_EXIT_CODE_VALUES else [_too_many(path, len(values), c.MAX_EXIT_CODE_VALUES)]
    for i, value in enumerate(values):
        if not -(2**31) <= value <= INT32_MAX:
            errors.append(fe.invalid(f"{path}[{i}]", value, "must be a 32-bit integer"))
        elif value in values[:i]:
            errors.append(FieldError(fe.ErrorType.DUPLICATE, f"{path}[{i}]", value))
    if values != sorted(values):
        errors.append(fe.invalid(path, values, "values must be sorted ascending"))
    if requirement.operator == c.EXIT_CODES_IN and 0 in values:
        errors.append(fe.invalid(path, values, "0 is not allowed with the In operator"))
    return errors


def version_errors(job: MPIJob, new: JSONDict, old: JSONDict | None = None) -> list[FieldError]:
    """The errors beyond ``validate`` of ``job``, parsed from ``new`` as ``MPIJobV2`` (v2) or ``MPIJob``
    (v2beta1): the v2-only field or its annotation, and on an update (``old`` given) their immutability."""
    if isinstance(job, MPIJobV2):
        errors = v2_errors(job) + stored_annotations_size_errors(new)
        if old is not None:
            errors += failure_policy_update_errors(_field(old), _field(new))
        return errors
    errors = annotation_errors(new)
    if old is not None and _annotation_content(old) != _annotation_content(new):
        errors.append(fe.invalid(ANNOTATION_PATH, _shown(annotation_value(new)),
                                 "is immutable: it holds spec.runPolicy.failurePolicy of kubeflow.org/v2"))
    return errors


def stored_annotations_size_errors(obj: JSONDict) -> list[FieldError]:
    """The API server's limit on the total size of annotations, applied to a v2 object as it will be stored:
    with the annotation conversion adds to keep its failurePolicy. The API server checks only the v2 request's
    annotations; a job stored over the limit would have every later v2beta1 update refused, status writes
    included."""
    try:
        stored = to_v2beta1(obj)
    except ConversionError:  # annotations that are not an object: the API server's own validation refuses them
        return []
    annotations = stored.get("metadata", {}).get("annotations")
    if not isinstance(annotations, dict):
        return []
    size = sum(len(str(key).encode()) + len(value.encode()) for key, value in annotations.items()
               if isinstance(value, str))
    if size <= TOTAL_ANNOTATION_SIZE_LIMIT:
        return []
    return [FieldError(fe.ErrorType.TOO_LONG, "metadata.annotations", None,
                       f"may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes")]


def _field(obj: JSONDict) -> JSONDict | None:
    spec = obj.get("spec")
    run_policy = spec.get("runPolicy") if isinstance(spec, dict) else None
    policy = run_policy.get("failurePolicy") if isinstance(run_policy, dict) else None
    return policy if isinstance(policy, dict) else None


def _annotation_content(obj: JSONDict) -> object:
    """What the annotation means, so that making it canonical (defaults included) is not a change: its failurePolicy
    with the v2 defaults, else its value."""
    value = annotation_value(obj)
    policy = parse_annotation(value) if isinstance(value, str) else None
    return _meaning(policy) if policy is not None else value
