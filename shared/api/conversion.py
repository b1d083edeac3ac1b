"""Conversion between kubeflow.org/v2 and kubeflow.org/v2beta1 MPIJobs: pure, total, lossless.

v2beta1 is the storage version. The v2-only field, ``spec.runPolicy.failurePolicy``, is kept in a v2beta1
object as the annotation ``mpijobs.kubeflow.org/v2-spec``: canonical JSON of the v2-only fields at their v2
paths. Only a *liftable* annotation is turned back into the field, with the v2 schema's defaults (as the API server
gives them to a v2 request, so that a stored policy read through v2 equals the one a v2 client writes back); any
other value is carried verbatim in both directions. So v2beta1 -> v2 -> v2beta1 gives back every object the
v2beta1 schema admits, byte for byte when its policy has its defaults (as the mutating webhook stores it), else
with them added; and v2 -> v2beta1 -> v2 every object the v2 schema admits (its defaults applied) without the
reserved annotation (docs/proposals/v2.md, "Conversion").
"""

from __future__ import annotations

import json
import re
from typing import Any

from shared.api import constants as c
from shared.jsondict import JSONDict

_FAILURE_POLICY_PATH = ("spec", "runPolicy", "failurePolicy")


class ConversionError(ValueError):
    """An object that is not an MPIJob this conversion knows (its message says why)."""


def canonical_json(value: Any) -> str:
    """The annotation's form: keys sorted, no insignificant whitespace."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def convert(obj: Any, desired_api_version: str) -> JSONDict:
    """``obj`` as ``desired_api_version``; ConversionError for anything but an MPIJob of a served version."""
    if desired_api_version not in c.API_VERSIONS:
        raise ConversionError(f"unsupported desiredAPIVersion {_shown(desired_api_version)}: "
                              f"supported are {', '.join(c.API_VERSIONS)}")
    if not isinstance(obj, dict):
        raise ConversionError("not an object")
    if obj.get("kind") != c.KIND:
        raise ConversionError(f"kind {_shown(obj.get('kind'))} is not {c.KIND}")
    api_version = obj.get("apiVersion")
    if api_version not in c.API_VERSIONS:
        raise ConversionError(f"unsupported apiVersion {_shown(api_version)}: "
                              f"supported are {', '.join(c.API_VERSIONS)}")
    if not isinstance(obj.get("metadata", {}), dict):
        raise ConversionError("metadata is not an object")
    if api_version == desired_api_version:
        return obj
    return to_v2(obj) if desired_api_version == c.API_VERSION_V2 else to_v2beta1(obj)


_IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9./-]{0,62}").fullmatch


def _shown(value: object) -> str:
    """A client's apiVersion or kind for a message: quoted when it looks like one, else described (so that
    whatever a client put there never reaches an answer or a log line)."""
    if value is None or (isinstance(value, str) and _IDENTIFIER(value)):
        return repr(value)
    return f"a string of {len(value)} characters" if isinstance(value, str) else f"a {type(value).__name__}"


def to_v2(obj: JSONDict) -> JSONDict:
    """A v2beta1 MPIJob as v2: a liftable annotation becomes ``spec.runPolicy.failurePolicy``, with the v2 defaults.

    The API server does not default an object converted from storage, but gives a v2 request its defaults; without
    them here its rule that the policy is unchanged would refuse every v2 update of a policy stored without them."""
    result = {**obj, "apiVersion": c.API_VERSION_V2}
    failure_policy = lifted_failure_policy(obj)
    if failure_policy is None:
        return result
    metadata = dict(obj["metadata"])
    annotations = {k: v for k, v in metadata["annotations"].items() if k != c.V2_SPEC_ANNOTATION}
    if annotations:
        metadata["annotations"] = annotations
    else:
        del metadata["annotations"]
    spec = dict(obj["spec"])
    spec["runPolicy"] = {**spec["runPolicy"], "failurePolicy": with_failure_policy_defaults(failure_policy)}
    return {**result, "metadata": metadata, "spec": spec}


def to_v2beta1(obj: JSONDict) -> JSONDict:
    """A v2 MPIJob as v2beta1: ``spec.runPolicy.failurePolicy`` moves into the annotation (replacing any value)."""
    result = {**obj, "apiVersion": c.API_VERSION}
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("runPolicy"), dict):
        return result
    run_policy: JSONDict = spec["runPolicy"]
    if run_policy.get("failurePolicy") is None:  # absent, or a null the API server prunes: nothing to keep
        return result
    metadata = dict(obj.get("metadata") or {})
    annotations = metadata.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        raise ConversionError("metadata.annotations is not an object")
    value = {"spec": {"runPolicy": {"failurePolicy": run_policy["failurePolicy"]}}}
    metadata["annotations"] = {**(annotations or {}), c.V2_SPEC_ANNOTATION: canonical_json(value)}
    kept = {k: v for k, v in run_policy.items() if k != "failurePolicy"}
    return {**result, "metadata": metadata, "spec": {**spec, "runPolicy": kept}}


def lifted_failure_policy(obj: JSONDict) -> JSONDict | None:
    """The ``failurePolicy`` a v2beta1 object's annotation holds if it is liftable, else None.

    Liftable: a string that is canonical JSON of ``{"spec":{"runPolicy":{"failurePolicy":{...}}}}`` and
    nothing else, holding only fields the v2 schema knows with their JSON types (so the API server's pruning
    of the converted object removes nothing), on an object whose ``spec.runPolicy`` is an object without a
    ``failurePolicy`` key. The reconciler reads the field through this function too.
    """
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    value = annotations.get(c.V2_SPEC_ANNOTATION) if isinstance(annotations, dict) else None
    spec = obj.get("spec")
    run_policy = spec.get("runPolicy") if isinstance(spec, dict) else None
    if not isinstance(value, str) or not isinstance(run_policy, dict) or "failurePolicy" in run_policy:
        return None
    failure_policy = parse_annotation(value)
    if failure_policy is None or canonical_json({"spec": {"runPolicy": {"failurePolicy": failure_policy}}}) != value:
        return None
    return failure_policy


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
    return node if _matches(node, _FAILURE_POLICY) else None


# The v2 schema of failurePolicy as JSON types: a dict is an object with these optional properties, a
# one-element list an array of that item type.
_INT, _STR = "integer", "string"
_FAILURE_POLICY: Any = {
    "maxRestarts": _INT,
    "rules": [{
        "name": _STR,
        "action": _STR,
        "onReplicaTypes": [_STR],
        "onPodConditions": [{"type": _STR, "status": _STR}],
        "onExitCodes": {"containerName": _STR, "operator": _STR, "values": [_INT]},
    }],
}


# The defaults the v2 schema gives inside a failurePolicy (hack/gen/crdgen/v2_schema.py), in the shape of
# ``_FAILURE_POLICY``: a string is the default of an absent property.
FAILURE_POLICY_DEFAULTS: Any = {"rules": [{"onPodConditions": [{"status": "True"}]}]}


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


def _matches(value: Any, schema: Any) -> bool:
    if schema == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if schema == _STR:
        return isinstance(value, str)
    if isinstance(schema, list):
        return isinstance(value, list) and all(_matches(item, schema[0]) for item in value)
    return (isinstance(value, dict)
            and all(key in schema and _matches(item, schema[key]) for key, item in value.items()))
