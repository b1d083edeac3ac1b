"""Validation of one kubeflow.org/v2 ``spec.runPolicy.failurePolicy``: the field errors its v2 CRD schema gives.

The enums, limits and CEL rules are those the models in v2types.py declare for the schema (docs/proposals/v2.md,
"Schema"), reported with Kubernetes-style field paths, where the API server would. The policy comes as the field of
a v2 object or as the v2beta1 annotation (v2_spec_annotation.py); version_validation.py says which.
"""

from __future__ import annotations

import re
from collections.abc import Sized

from shared.api import constants as c
from shared.api import dns
from shared.api import field_errors as fe
from shared.api import v2types as v2
from shared.api.field_errors import FieldError
from shared.api.v2types import ExitCodesRequirement, FailurePolicy, FailurePolicyRule, PodConditionPattern, api

PATH = "spec.runPolicy.failurePolicy"
INT32_MAX = 2**31 - 1
_MAX_RESTARTS, _RULES = api(FailurePolicy, "max_restarts"), api(FailurePolicy, "rules")
_NAME, _CONDITIONS = api(FailurePolicyRule, "name"), api(FailurePolicyRule, "on_pod_conditions")
_EXIT_CODES = api(ExitCodesRequirement, "values")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]").fullmatch


def failure_policy_errors(policy: FailurePolicy, path: str = PATH) -> list[FieldError]:
    """Every error of one failurePolicy, in the order of its fields."""
    errors: list[FieldError] = []
    if policy.max_restarts is not None:
        errors += _range_errors(f"{path}.maxRestarts", policy.max_restarts, _MAX_RESTARTS.minimum)
    rules = policy.rules
    if not rules:
        return [*errors, fe.required(f"{path}.rules", "must have at least one rule")]
    errors += _too_many(f"{path}.rules", rules, _RULES.max_items)
    seen: set[str] = set()
    for i, rule in enumerate(rules):
        errors += _rule_errors(rule, f"{path}.rules[{i}]", seen)
    if policy.max_restarts is None and any(rule.action == c.ACTION_RESTART_JOB for rule in rules):
        errors.append(fe.required(f"{path}.maxRestarts", v2.MAX_RESTARTS_REQUIRED.message))
    return errors


def _range_errors(path: str, value: int, minimum: int | None) -> list[FieldError]:
    if minimum is not None and value < minimum:
        return [fe.invalid(path, value, f"must be greater than or equal to {minimum}", "minimum")]
    if value > INT32_MAX:
        return [fe.invalid(path, value, f"must be less than or equal to {INT32_MAX}", "maximum")]
    return []


def _too_many(path: str, items: Sized, limit: int | None) -> list[FieldError]:
    if limit is None or len(items) <= limit:
        return []
    return [FieldError(fe.ErrorType.TOO_MANY, path, len(items), f"must have at most {limit} items")]


def _rule_errors(rule: FailurePolicyRule, path: str, seen: set[str]) -> list[FieldError]:
    errors = _rule_name_errors(rule.name, f"{path}.name", seen)
    if rule.action is None:
        errors.append(fe.required(f"{path}.action", ""))
    elif rule.action not in c.FAILURE_POLICY_ACTIONS:
        errors.append(fe.not_supported(f"{path}.action", rule.action, c.FAILURE_POLICY_ACTIONS))
    errors += _replica_types_errors(rule.on_replica_types, f"{path}.onReplicaTypes")
    if (rule.on_pod_conditions is None) == (rule.on_exit_codes is None):
        errors.append(fe.invalid(path, None, v2.ONE_MATCHER.message))
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
    if _NAME.max_length is not None and len(name) > _NAME.max_length:
        return [FieldError(fe.ErrorType.TOO_LONG, path, name, f"may not be more than {_NAME.max_length} bytes")]
    if _NAME.pattern is not None and not re.fullmatch(_NAME.pattern, name):
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
    errors = _too_many(path, patterns, _CONDITIONS.max_items)
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
    errors = _too_many(path, values, _EXIT_CODES.max_items)
    for i, value in enumerate(values):
        if not -(2**31) <= value <= INT32_MAX:
            errors.append(fe.invalid(f"{path}[{i}]", value, "must be a 32-bit integer"))
        elif value in values[:i]:
            errors.append(FieldError(fe.ErrorType.DUPLICATE, f"{path}[{i}]", value))
    if values != sorted(values):
        errors.append(fe.invalid(path, values, v2.SORTED_EXIT_CODES.message))
    if requirement.operator == c.EXIT_CODES_IN and 0 in values:
        errors.append(fe.invalid(path, values, v2.NO_ZERO_WITH_IN.message))
    return errors
