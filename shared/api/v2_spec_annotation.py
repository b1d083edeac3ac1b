"""The annotation ``mpijobs.kubeflow.org/v2-spec``: where a v2beta1 object keeps kubeflow.org/v2's
``spec.runPolicy.failurePolicy``.

Its value is JSON of ``{"spec":{"runPolicy":{"failurePolicy":{...}}}}``, canonical (keys sorted, no spaces) when
conversion or the mutating webhook wrote it. Here: reading it (the value, the policy it holds, whether conversion
can lift it into the field), writing it, and what admission says about it (its errors, its canonical form, its
warning, its immutability). Conversion itself is conversion.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from shared.api import constants as c
from shared.api import field_errors as fe
from shared.api import shown
from shared.api.failure_policy_validation import failure_policy_errors
from shared.api.field_errors import FieldError
from shared.api.v2types import FailurePolicy, has_json_types, with_failure_policy_defaults
from shared.jsondict import JSONDict, object_at

ANNOTATION_PATH = f"metadata.annotations[{c.V2_SPEC_ANNOTATION}]"
_FAILURE_POLICY_PATH = ("spec", "runPolicy", "failurePolicy")


def canonical_json(value: Any) -> str:
    """The annotation's form: keys sorted, no insignificant whitespace."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def annotation_of(failure_policy: Any) -> str:
    """The annotation's value holding ``failure_policy``, in canonical form."""
    return canonical_json({"spec": {"runPolicy": {"failurePolicy": failure_policy}}})


def annotation_value(obj: JSONDict) -> object:
    """The annotation's value (of any type), or None when the object has none."""
    annotations = object_at(obj, "metadata", "annotations")
    return annotations.get(c.V2_SPEC_ANNOTATION) if annotations is not None else None


def parse_annotation(value: str) -> JSONDict | None:
    """The ``failurePolicy`` of an annotation value whose only path is ``spec.runPolicy.failurePolicy`` and whose
    fields are all known with their JSON types, whether canonical or not; None for anything else."""
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError):  # not JSON, digits beyond Python's limit, nested too deep
        return None
    node: Any = decoded
    for key in _FAILURE_POLICY_PATH:
        if not isinstance(node, dict) or list(node) != [key]:
            return None
        node = node[key]
    return node if has_json_types(node) else None


def annotated_failure_policy(obj: JSONDict) -> JSONDict | None:
    """The failurePolicy a v2beta1 object's annotation holds, canonical or not (as ``annotation_errors`` accepts
    it), on an object whose ``spec.runPolicy`` is an object; else None. What the reconciler runs a job with:
    only conversion requires the canonical form (``lifted_failure_policy``)."""
    value = annotation_value(obj)
    has_run_policy = object_at(obj, "spec", "runPolicy") is not None
    return parse_annotation(value) if isinstance(value, str) and has_run_policy else None


def lifted_failure_policy(obj: JSONDict) -> JSONDict | None:
    """The ``failurePolicy`` a v2beta1 object's annotation holds if it is liftable, else None.

    Liftable: a string that is canonical JSON of ``{"spec":{"runPolicy":{"failurePolicy":{...}}}}`` and
    nothing else, holding only fields the v2 schema knows with their JSON types (so the API server's pruning
    of the converted object removes nothing), on an object whose ``spec.runPolicy`` is an object without a
    ``failurePolicy`` key.
    """
    value = annotation_value(obj)
    run_policy = object_at(obj, "spec", "runPolicy")
    if not isinstance(value, str) or run_policy is None or "failurePolicy" in run_policy:
        return None
    failure_policy = parse_annotation(value)
    if failure_policy is None or annotation_of(failure_policy) != value:
        return None
    return failure_policy


def annotation_errors(obj: JSONDict) -> list[FieldError]:
    """Errors of a v2beta1 object's annotation: a value that is not a failurePolicy, or an invalid one."""
    value = annotation_value(obj)
    if value is None:
        return []
    policy = annotated_failure_policy(obj)
    if policy is None:
        detail = ('must be JSON of {"spec":{"runPolicy":{"failurePolicy":{...}}}} with only fields of '
                  f"{c.API_VERSION_V2}, on an MPIJob with spec.runPolicy")
        return [fe.invalid(ANNOTATION_PATH, shown.field_value(value), detail)]
    # Errors inside the value name their path in it: metadata.annotations[...].spec.runPolicy.failurePolicy...
    errors = failure_policy_errors(FailurePolicy.model_validate(policy))
    return [replace(error, field=f"{ANNOTATION_PATH}.{error.field}") for error in errors]


def canonical_annotation(obj: JSONDict) -> str | None:
    """The canonical form of a valid annotation value, with the v2 defaults applied (so that the stored policy is
    the one a v2 client reads and writes back), for the mutating webhook; None when it is already in that form or
    is not valid."""
    policy = annotated_failure_policy(obj)
    if policy is None or annotation_errors(obj):
        return None
    canonical = annotation_of(with_failure_policy_defaults(policy))
    return canonical if canonical != annotation_value(obj) else None


def annotation_warnings(obj: JSONDict) -> list[str]:
    """A warning for a valid annotation that conversion cannot lift (it is not canonical JSON: the mutating webhook,
    which makes it canonical, did not run): the job runs with its policy, but kubeflow.org/v2 clients see the
    annotation instead of spec.runPolicy.failurePolicy."""
    if annotated_failure_policy(obj) is None or lifted_failure_policy(obj) is not None or annotation_errors(obj):
        return []
    return [f"{ANNOTATION_PATH}: is not canonical JSON (keys sorted, no spaces), so {c.API_VERSION_V2} clients see "
            "this annotation instead of spec.runPolicy.failurePolicy; the job runs with the policy it holds"]


def annotation_update_errors(old: JSONDict, new: JSONDict) -> list[FieldError]:
    """The annotation is immutable: what it means may not change on an update (making it canonical does not)."""
    if _annotation_content(old) == _annotation_content(new):
        return []
    return [fe.invalid(ANNOTATION_PATH, shown.field_value(annotation_value(new)),
                       "is immutable: it holds spec.runPolicy.failurePolicy of kubeflow.org/v2")]


def _annotation_content(obj: JSONDict) -> object:
    """What the annotation means, so that making it canonical (defaults included) is not a change: its failurePolicy
    with the v2 defaults, else its value."""
    value = annotation_value(obj)
    policy = parse_annotation(value) if isinstance(value, str) else None
    return with_failure_policy_defaults(policy) if policy is not None else value
