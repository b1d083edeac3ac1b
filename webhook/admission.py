"""Pure admission logic over AdmissionReview dicts (admission.k8s.io/v1): no I/O, no clock.

``parse_review`` rejects what is not an AdmissionReview (``BadReviewError``, HTTP 400). ``mutate`` and
``validate`` turn a request into an ``Admission``: the response body plus the outcome for logs and
metrics.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import orjson

from shared.api import (
    FieldError,
    MPIJob,
    admission_warnings,
    capped,
    defaulted_dict,
    defaults_patch,
    invalid_status,
    parse_mpijob,
    shown,
    validate,
    validate_update,
)
from shared.api import constants as c
from shared.api.config_map_size import config_map_size_errors, config_map_size_warnings
from shared.api.readiness_probe import probe_patch
from shared.api.v2_spec_annotation import annotation_warnings, canonical_annotation
from shared.api.v2types import MPIJobV2
from shared.api.version_validation import version_errors
from shared.api.worker_backend_validation import indexed_job_warnings
from shared.jsondict import JSONDict

REVIEW_API_VERSION: Final = "admission.k8s.io/v1"
REVIEW_KIND: Final = "AdmissionReview"
WRITE_OPERATIONS: Final = ("CREATE", "UPDATE")


class BadReviewError(ValueError):
    """The body is not an AdmissionReview this webhook can answer."""


@dataclass
class Admission:
    """The response to one admission request, and how it went."""

    response: JSONDict
    outcome: str  # allowed | patched | denied | error
    patch_ops: int = 0
    errors: list[FieldError] = field(default_factory=list)
    skipped: str = ""  # why a mutation that was due was not made (the pod webhook: a pod without a valid index)

    def review(self) -> JSONDict:
        return {"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "response": self.response}


def parse_review(body: bytes) -> JSONDict:
    """The ``request`` of an AdmissionReview body; ``BadReviewError`` says what is wrong with anything else."""
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        raise BadReviewError(f"request body is not valid JSON (error at {where})") from None
    if not isinstance(review, dict):
        raise BadReviewError("request body must be a JSON object (an AdmissionReview)")
    if review.get("apiVersion") != REVIEW_API_VERSION or review.get("kind") != REVIEW_KIND:
        raise BadReviewError(
            f"expected apiVersion {REVIEW_API_VERSION} kind {REVIEW_KIND}, "
            f"got apiVersion {shown.identifier(review.get('apiVersion'))} "
            f"kind {shown.identifier(review.get('kind'))}"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReviewError("AdmissionReview.request must be an object")
    if not isinstance(request.get("uid"), str) or not request["uid"]:
        raise BadReviewError("AdmissionReview.request.uid must be a non-empty string")
    if not isinstance(request.get("operation"), str):
        raise BadReviewError("AdmissionReview.request.operation must be a string")
    if request["operation"] in WRITE_OPERATIONS and not isinstance(request.get("object"), dict):
        raise BadReviewError(f"AdmissionReview.request.object must be an object for {request['operation']}")
    if request["operation"] == "UPDATE" and not isinstance(request.get("oldObject"), dict):
        raise BadReviewError("AdmissionReview.request.oldObject must be an object for UPDATE")
    return request


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}").fullmatch
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?").fullmatch
_OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})


def log_fields(request: JSONDict) -> JSONDict:
    """uid, operation, namespace and name of a request for its log line, each only when it has the form the
    API server gives it (a UUID, an operation, DNS names); anything else is described by its length, so
    whatever a client put there (a key, a token, megabytes) never reaches a log line."""
    uid, operation = request["uid"], request["operation"]
    namespace, name = request.get("namespace", ""), request.get("name", "")
    return {
        "uid": uid if _kept(uid, _UUID) else _described(uid),
        "operation": operation if _kept(operation, _OPERATIONS.__contains__) else _described(operation),
        "namespace": namespace if _kept(namespace, _NAME) else _described(namespace),
        "name": name if _kept(name, _NAME) else _described(name),
    }


def _kept(value: object, has_its_form: Callable[[str], object]) -> bool:
    return value in ("", None) or (isinstance(value, str) and bool(has_its_form(value)))


def _described(value: object) -> str:
    return f"<{len(value)} characters>" if isinstance(value, str) else "<not a string>"


def mutate(request: JSONDict) -> Admission:
    """Default an MPIJob: a JSON Patch that only adds unset fields, or a plain allow."""
    skip = _not_ours(request)
    if skip is not None:
        return skip
    patch = defaults_patch(request["object"])
    if request["operation"] == "CREATE":  # the opt-in worker readinessProbe (shared/api/readiness_probe.py)
        patch += probe_patch(request["object"])
    canonical = canonical_annotation(request["object"]) if _version(request) == c.VERSION else None
    if canonical is not None:  # a valid failurePolicy annotation written by a v2beta1 client, in canonical form
        patch.append({"op": "replace", "path": _ANNOTATION_POINTER, "value": canonical})
    if not patch:
        return _allowed(request)
    encoded = base64.b64encode(orjson.dumps(patch)).decode()
    response = {"uid": request["uid"], "allowed": True, "patchType": "JSONPatch", "patch": encoded}
    return Admission(response, "patched", patch_ops=len(patch))


def validate_request(request: JSONDict, cluster_domain: str = "") -> Admission:
    """Allow or deny an MPIJob as upstream's controller would judge it after defaulting, plus our rules.
    ``cluster_domain`` (the webhook's ``--cluster-domain``, as the reconciler's) lengthens the host names
    counted in the job's ConfigMap size."""
    skip = _not_ours(request)
    if skip is not None:
        return skip
    new, errors = parse_mpijob(defaulted_dict(request["object"]), _MODELS[_version(request)])
    if new is not None:
        errors, warnings = _judge(request, new, cluster_domain)
    else:
        warnings = []
    if not errors:
        admission = _allowed(request)
        if warnings:
            admission.response["warnings"] = warnings
        return admission
    name = _object_name(request)
    errors = capped(errors)
    response = {"uid": request["uid"], "allowed": False, "status": invalid_status(name, errors)}
    if warnings:
        response["warnings"] = warnings
    return Admission(response, "denied", errors=errors)


def errored(uid: str, code: int, message: str) -> JSONDict:
    """An AdmissionReview reporting that this webhook could not judge the request."""
    status = {"status": "Failure", "message": message, "reason": _REASONS.get(code, "InternalError"), "code": code}
    return Admission({"uid": uid, "allowed": False, "status": status}, "error").review()


_REASONS = {400: "BadRequest", 413: "RequestEntityTooLarge", 500: "InternalError"}


_ANNOTATION_POINTER = "/metadata/annotations/" + c.V2_SPEC_ANNOTATION.replace("~", "~0").replace("/", "~1")
_MODELS: dict[str, type[MPIJob]] = {c.VERSION: MPIJob, c.VERSION_V2: MPIJobV2}
_VERSIONS = list(_MODELS)  # a list: `in` compares a client's value, which may be unhashable, without hashing


def _version(request: JSONDict) -> str:
    """The API version of the request's object (``_not_ours`` refused any other)."""
    kind = request.get("kind")
    version = kind.get("version") if isinstance(kind, dict) else None
    return version if version in _VERSIONS else c.VERSION


def _judge(request: JSONDict, defaulted: MPIJob, cluster_domain: str) -> tuple[list[FieldError], list[str]]:
    """Errors and warnings of an MPIJob that has its defaults, as upstream's controller judges it, plus those of
    its API version's own field (v2) or annotation (v2beta1) and of its ConfigMap's size."""
    new = request["object"]
    warnings = admission_warnings(defaulted) + ([] if isinstance(defaulted, MPIJobV2) else annotation_warnings(new))
    warnings += config_map_size_warnings(defaulted, cluster_domain)
    if request["operation"] != "UPDATE":
        return _errors(defaulted, new, cluster_domain), warnings + indexed_job_warnings(defaulted, new)
    old_defaulted, _ = parse_mpijob(defaulted_dict(request["oldObject"]), type(defaulted))
    if old_defaulted is None:
        return _errors(defaulted, new, cluster_domain), warnings
    errors = (validate_update(old_defaulted, defaulted) + version_errors(defaulted, new, request["oldObject"])
              + config_map_size_errors(defaulted, cluster_domain))
    if defaulted.metadata.get("deletionTimestamp"):
        errors = [e for e in errors if e.field.startswith("spec.runPolicy.managedBy")]
    # Ratcheting: an object stored before this webhook existed may already be invalid; an update
    # (labels, finalizers, Kueue's scheduling directives) is denied only for problems it adds.
    existing = {str(e) for e in validate(old_defaulted) + version_errors(old_defaulted, request["oldObject"])
                + config_map_size_errors(old_defaulted, cluster_domain)}
    return [e for e in errors if str(e) not in existing], warnings


def _errors(defaulted: MPIJob, document: JSONDict, cluster_domain: str) -> list[FieldError]:
    """A created MPIJob's errors: upstream's rules and ours, its API version's, then its ConfigMap's size (only
    when the rest is valid: a size is computed from a job that makes sense)."""
    errors = validate(defaulted) + version_errors(defaulted, document)
    return errors or config_map_size_errors(defaulted, cluster_domain)


def _not_ours(request: JSONDict) -> Admission | None:
    """Allow what needs no judgement; deny (400) a resource this webhook was not made for."""
    if request["operation"] not in WRITE_OPERATIONS or request.get("subResource"):
        return _allowed(request)
    kind = request.get("kind")
    if isinstance(kind, dict) and ((kind.get("group"), kind.get("kind")) != (c.GROUP, c.KIND)
                                   or kind.get("version") not in _VERSIONS):
        got = f"{kind.get('group')}/{kind.get('version')}, Kind={kind.get('kind')}"
        message = (f"this webhook admits only {c.API_VERSION} and {c.API_VERSION_V2}, Kind={c.KIND}; got {got}: "
                   "check the webhook rules")
        status = {"status": "Failure", "message": message, "reason": "BadRequest", "code": 400}
        return Admission({"uid": request["uid"], "allowed": False, "status": status}, "denied")
    return None


def _allowed(request: JSONDict) -> Admission:
    return Admission({"uid": request["uid"], "allowed": True}, "allowed")


def _object_name(request: JSONDict) -> str:
    metadata = request["object"].get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) and name else str(request.get("name") or "")
