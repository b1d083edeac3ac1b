"""kubeflow.org/v2beta1 MPIJob: models, constants, names, defaulting and validation. Pure: no I/O."""

from shared.api.defaults import defaulted_dict, defaults_patch
from shared.api.field_errors import ErrorType, FieldError, aggregate, capped, invalid_status
from shared.api.parse import parse_mpijob
from shared.api.types import JobCondition, JobStatus, MPIJob, MPIJobSpec, ReplicaSpec, ReplicaStatus, RunPolicy
from shared.api.validation import validate, validate_update, validate_upstream
from shared.api.warnings import admission_warnings

__all__ = [
    "ErrorType",
    "FieldError",
    "JobCondition",
    "JobStatus",
    "MPIJob",
    "MPIJobSpec",
    "ReplicaSpec",
    "ReplicaStatus",
    "RunPolicy",
    "admission_warnings",
    "aggregate",
    "capped",
    "defaulted_dict",
    "defaults_patch",
    "invalid_status",
    "parse_mpijob",
    "validate",
    "validate_update",
    "validate_upstream",
]
