"""The checks that depend on an MPIJob's API version, beyond ``validate``: kubeflow.org/v2's failurePolicy and
workerBackend, or the v2beta1 annotations that hold them, and their immutability.
"""

from __future__ import annotations

from shared.api import constants as c
from shared.api import field_errors as fe
from shared.api.conversion import ConversionError, to_v2beta1
from shared.api.failure_policy_validation import PATH, failure_policy_errors
from shared.api.field_errors import FieldError
from shared.api.types import MPIJob
from shared.api.v2_spec_annotation import ANNOTATION_PATH, annotation_errors, annotation_update_errors
from shared.api.v2types import MPIJobV2, with_failure_policy_defaults
from shared.api.worker_backend_validation import worker_backend_errors
from shared.jsondict import JSONDict, object_at

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # bytes of keys and values: apimachinery's TotalAnnotationSizeLimitB


def version_errors(job: MPIJob, new: JSONDict, old: JSONDict | None = None) -> list[FieldError]:
    """The errors beyond ``validate`` of ``job``, parsed from ``new`` as ``MPIJobV2`` (v2) or ``MPIJob``
    (v2beta1): the v2-only fields or their annotations, and on an update (``old`` given) their immutability."""
    if isinstance(job, MPIJobV2):
        errors = v2_errors(job) + stored_annotations_size_errors(new)
        if old is not None:
            errors += failure_policy_update_errors(_failure_policy(old), _failure_policy(new))
        return errors + worker_backend_errors(job, new, old)
    errors = annotation_errors(new)
    errors += annotation_update_errors(old, new) if old is not None else []
    return errors + worker_backend_errors(job, new, old)


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


def _failure_policy(obj: JSONDict) -> JSONDict | None:
    return object_at(obj, "spec", "runPolicy", "failurePolicy")
