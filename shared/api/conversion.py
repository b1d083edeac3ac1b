"""Conversion between kubeflow.org/v2 and kubeflow.org/v2beta1 MPIJobs: pure, total, lossless.

v2beta1 is the storage version. The v2-only field, ``spec.runPolicy.failurePolicy``, is kept in a v2beta1
object as the annotation ``mpijobs.kubeflow.org/v2-spec``: canonical JSON of the v2-only fields at their v2
paths. Only a *liftable* annotation is turned back into the field, with the v2 schema's defaults (as the API server
gives them to a v2 request, so that a stored policy read through v2 equals the one a v2 client writes back); any
other value is carried verbatim in both directions. So v2beta1 -> v2 -> v2beta1 gives back every object the
v2beta1 schema admits, byte for byte when its policy has its defaults (as the mutating webhook stores it), else
with them added; and v2 -> v2beta1 -> v2 every object the v2 schema admits (its defaults applied) without the
reserved annotation (docs/proposals/v2.md, "Conversion"). Reading and writing the annotation is
v2_spec_annotation.py.

``spec.workerBackend`` is kept the same way in the annotation ``mpijobs.kubeflow.org/worker-backend``, its value the
field's (docs/proposals/indexed-job-workers.md): one of ``Pods`` and ``IndexedJob`` is lifted into the field of an
object whose ``spec`` has none, any other value is carried verbatim.
"""

from __future__ import annotations

from typing import Any

from shared.api import constants as c
from shared.api import shown
from shared.api.v2_spec_annotation import annotation_of, lifted_failure_policy
from shared.api.v2types import with_failure_policy_defaults
from shared.api.worker_backend import WORKER_BACKEND_ANNOTATION, WORKER_BACKENDS
from shared.jsondict import JSONDict, object_at


class ConversionError(ValueError):
    """An object that is not an MPIJob this conversion knows (its message says why)."""


def convert(obj: Any, desired_api_version: str) -> JSONDict:
    """``obj`` as ``desired_api_version``; ConversionError for anything but an MPIJob of a served version."""
    if desired_api_version not in c.API_VERSIONS:
        raise ConversionError(f"unsupported desiredAPIVersion {shown.identifier(desired_api_version)}: "
                              f"supported are {', '.join(c.API_VERSIONS)}")
    if not isinstance(obj, dict):
        raise ConversionError("not an object")
    if obj.get("kind") != c.KIND:
        raise ConversionError(f"kind {shown.identifier(obj.get('kind'))} is not {c.KIND}")
    api_version = obj.get("apiVersion")
    if api_version not in c.API_VERSIONS:
        raise ConversionError(f"unsupported apiVersion {shown.identifier(api_version)}: "
                              f"supported are {', '.join(c.API_VERSIONS)}")
    if not isinstance(obj.get("metadata", {}), dict):
        raise ConversionError("metadata is not an object")
    if api_version == desired_api_version:
        return obj
    return to_v2(obj) if desired_api_version == c.API_VERSION_V2 else to_v2beta1(obj)


def to_v2(obj: JSONDict) -> JSONDict:
    """A v2beta1 MPIJob as v2: a liftable annotation becomes ``spec.runPolicy.failurePolicy``, with the v2 defaults,
    and a valid worker-backend annotation ``spec.workerBackend``.

    The API server does not default an object converted from storage, but gives a v2 request its defaults; without
    them here its rule that the policy is unchanged would refuse every v2 update of a policy stored without them."""
    result = {**obj, "apiVersion": c.API_VERSION_V2}
    failure_policy = lifted_failure_policy(obj)
    if failure_policy is not None:
        spec = dict(obj["spec"])
        spec["runPolicy"] = {**spec["runPolicy"], "failurePolicy": with_failure_policy_defaults(failure_policy)}
        result = {**result, "metadata": _without_annotation(obj, c.V2_SPEC_ANNOTATION), "spec": spec}
    backend = _lifted_worker_backend(result)
    if backend is not None:
        result = {**result, "metadata": _without_annotation(result, WORKER_BACKEND_ANNOTATION),
                  "spec": {**result["spec"], "workerBackend": backend}}
    return result


def _lifted_worker_backend(obj: JSONDict) -> str | None:
    """The backend a v2beta1 object's annotation names if conversion lifts it: one of WORKER_BACKENDS, on an object
    whose ``spec`` is an object without ``workerBackend``."""
    annotations = object_at(obj, "metadata", "annotations")
    value = annotations.get(WORKER_BACKEND_ANNOTATION) if annotations is not None else None
    spec = object_at(obj, "spec")
    if value not in WORKER_BACKENDS or spec is None or "workerBackend" in spec:
        return None
    return str(value)


def _without_annotation(obj: JSONDict, key: str) -> JSONDict:
    """``obj``'s metadata without the annotation ``key``, and without ``annotations`` when none is left."""
    metadata = dict(obj["metadata"])
    annotations = {k: v for k, v in metadata["annotations"].items() if k != key}
    if annotations:
        metadata["annotations"] = annotations
    else:
        del metadata["annotations"]
    return metadata


def to_v2beta1(obj: JSONDict) -> JSONDict:
    """A v2 MPIJob as v2beta1: ``spec.runPolicy.failurePolicy`` and a string ``spec.workerBackend`` move into their
    annotations (replacing any value); a null the API server prunes, or a value of another type its schema refuses,
    stays where it is."""
    result = {**obj, "apiVersion": c.API_VERSION}
    moved: dict[str, str] = {}
    spec = object_at(obj, "spec")
    run_policy = object_at(obj, "spec", "runPolicy")
    if run_policy is not None and run_policy.get("failurePolicy") is not None:
        moved[c.V2_SPEC_ANNOTATION] = annotation_of(run_policy["failurePolicy"])
        kept = {k: v for k, v in run_policy.items() if k != "failurePolicy"}
        spec = {**obj["spec"], "runPolicy": kept}
    if spec is not None and isinstance(spec.get("workerBackend"), str):
        moved[WORKER_BACKEND_ANNOTATION] = spec["workerBackend"]
        spec = {k: v for k, v in spec.items() if k != "workerBackend"}
    if not moved:
        return result
    metadata = dict(obj.get("metadata") or {})
    annotations = metadata.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        raise ConversionError("metadata.annotations is not an object")
    metadata["annotations"] = {**(annotations or {}), **moved}
    return {**result, "metadata": metadata, "spec": spec}
