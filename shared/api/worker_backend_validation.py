"""Admission of the worker backend a job names (docs/proposals/indexed-job-workers.md): kubeflow.org/v2's
``spec.workerBackend`` or v2beta1's annotation ``mpijobs.kubeflow.org/worker-backend``, its value, its immutability,
and with ``IndexedJob`` what the Job API would refuse in a worker template that upstream's MPIJob accepts.

Upstream's own rules already cover the rest: the worker's ``restartPolicy`` (the replica's, which replaces the
template's) is Never or OnFailure, as a Job requires; ``<job>-worker-<replicas-1>`` is a DNS-1035 label, as the Job's
longest hostname must be; and the ConfigMap size rule caps the workers far below an Indexed Job's 100,000.
"""

from __future__ import annotations

from typing import Any

from shared.api import constants as c
from shared.api import field_errors as fe
from shared.api import shown
from shared.api.field_errors import FieldError
from shared.api.types import MPIJob
from shared.api.v2types import MPIJobV2
from shared.api.worker_backend import (
    WORKER_BACKEND_ANNOTATION,
    WORKER_BACKEND_INDEXED_JOB,
    WORKER_BACKENDS,
    worker_job_name,
)
from shared.jsondict import JSONDict, object_at

FIELD_PATH = "spec.workerBackend"
ANNOTATION_PATH = f"metadata.annotations[{WORKER_BACKEND_ANNOTATION}]"
_WORKER = f"spec.mpiReplicaSpecs[{c.WORKER}]"
# The labels by which a Job selects its pods (batch/v1 validateGeneratedSelector): a template may carry them only
# with the values the API server gives them, the Job's name and UID (unknown before the Job exists).
_JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
_CONTROLLER_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")


def named_backend(document: JSONDict, v2: bool) -> object:
    """The backend an object names, valid or not: its v2 field (``v2``) or its v2beta1 annotation; None for none."""
    if v2:
        spec = object_at(document, "spec")
        return spec.get("workerBackend") if spec is not None else None
    annotations = object_at(document, "metadata", "annotations")
    return annotations.get(WORKER_BACKEND_ANNOTATION) if annotations is not None else None


def worker_backend_errors(job: MPIJob, document: JSONDict, old: JSONDict | None = None) -> list[FieldError]:
    """The errors of the backend ``job`` (parsed from ``document``) names: a value not in the enum, a change on an
    update (``old`` given: set, changed or removed), the annotation set on a v2 object (the field says it there), and
    with ``IndexedJob`` the worker template's problems (``indexed_job_errors``)."""
    v2 = isinstance(job, MPIJobV2)
    path = FIELD_PATH if v2 else ANNOTATION_PATH
    value = named_backend(document, v2)
    errors: list[FieldError] = []
    if v2 and named_backend(document, v2=False) is not None:
        errors.append(fe.forbidden(ANNOTATION_PATH, f"is reserved for storing spec.workerBackend in {c.API_VERSION}; "
                                                    "set spec.workerBackend instead"))
    if value is not None and value not in WORKER_BACKENDS:
        errors.append(fe.not_supported(path, shown.field_value(value), WORKER_BACKENDS))
    if old is not None and named_backend(old, v2) != value:
        errors.append(fe.invalid(path, shown.field_value(value),
                                 "field is immutable: the worker backend is chosen when the job is created"))
    if value == WORKER_BACKEND_INDEXED_JOB:
        errors += indexed_job_errors(job)
    return errors


def indexed_job_errors(job: MPIJob) -> list[FieldError]:
    """What the worker Job made from ``job`` (defaulted) cannot carry that upstream's MPIJob accepts: a hostname or
    subdomain (the Job controller and the operator set them) and the Job's selector labels, which the Job API refuses
    with other values. For the reconciler too, with its ``--default-worker-backend``. (A v2 failurePolicy is not
    mapped onto the Job's podFailurePolicy, docs/reconciler.md, so a worker restartPolicy OnFailure stays valid.)"""
    worker = job.replica_spec(c.WORKER)
    if worker is None:
        return []
    template = worker.template if isinstance(worker.template, dict) else {}
    pod_spec = _dict(template.get("spec"))
    errors: list[FieldError] = []
    if pod_spec.get("hostname"):
        errors.append(fe.forbidden(f"{_WORKER}.template.spec.hostname", "must not be set with the IndexedJob worker "
                                   "backend: the Job controller names each worker's host <job>-worker-<index>"))
    if pod_spec.get("subdomain"):
        errors.append(fe.forbidden(f"{_WORKER}.template.spec.subdomain", "must not be set with the IndexedJob "
                                   "worker backend: the operator sets it to the job's Service, <job>"))
    return errors + _selector_label_errors(job, _dict(_dict(template.get("metadata")).get("labels")))


def _selector_label_errors(job: MPIJob, labels: dict[str, Any]) -> list[FieldError]:
    path = f"{_WORKER}.template.metadata.labels"
    job_name = worker_job_name(job.name)
    errors = [fe.invalid(f"{path}[{key}]", shown.field_value(labels[key]),
                         f"must be unset or {job_name} with the IndexedJob worker backend: the worker Job's name, "
                         "by which it selects its pods")
              for key in _JOB_NAME_LABELS if key in labels and labels[key] != job_name]
    errors += [fe.forbidden(f"{path}[{key}]", "must not be set with the IndexedJob worker backend: the API server "
                            "sets it to the worker Job's UID, by which it selects its pods")
               for key in _CONTROLLER_UID_LABELS if key in labels]
    return errors


def indexed_job_warnings(job: MPIJob, document: JSONDict) -> list[str]:
    """The warning for a job created with the IndexedJob backend: its worker pods' names change."""
    v2 = isinstance(job, MPIJobV2)
    if named_backend(document, v2) != WORKER_BACKEND_INDEXED_JOB:
        return []
    path = FIELD_PATH if v2 else ANNOTATION_PATH
    return [f"{path}: with IndexedJob, worker pods are named {job.name}-worker-<index>-<random> (hostnames unchanged): "
            f"select one by label, e.g. kubectl logs -l {c.LABEL_JOB_NAME}={job.name},"
            "batch.kubernetes.io/job-completion-index=0"]


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
