"""Which worker backend runs a job's workers (docs/proposals/indexed-job-workers.md): plain Pods, created one by one
by the reconciler (the default, upstream's), or one Indexed ``batch/v1`` Job ``<job>-worker``.

kubeflow.org/v2 says it in ``spec.workerBackend``; a v2beta1 object (and so every stored object: v2beta1 is the
storage version) in the annotation ``mpijobs.kubeflow.org/worker-backend``, which conversion lifts into the field
and back. A job that says nothing gets the reconciler's ``--default-worker-backend``.
"""

from __future__ import annotations

from typing import Final

from shared.api import constants as c
from shared.jsondict import JSONDict, object_at

WORKER_BACKEND_ANNOTATION: Final = "mpijobs.kubeflow.org/worker-backend"
WORKER_BACKEND_PODS: Final = "Pods"
WORKER_BACKEND_INDEXED_JOB: Final = "IndexedJob"
WORKER_BACKENDS: Final = (WORKER_BACKEND_PODS, WORKER_BACKEND_INDEXED_JOB)


def annotated_worker_backend(obj: JSONDict) -> str | None:
    """The backend a stored (v2beta1) object's annotation names, when it names one of ``WORKER_BACKENDS``."""
    annotations = object_at(obj, "metadata", "annotations")
    value = annotations.get(WORKER_BACKEND_ANNOTATION) if annotations is not None else None
    return value if value in WORKER_BACKENDS else None


def worker_backend_of(obj: JSONDict, default: str = WORKER_BACKEND_PODS) -> str:
    """The backend of a stored object: its annotation's, else ``default`` (the operator's flag)."""
    return annotated_worker_backend(obj) or default

# On the worker Job's pod template (IndexedJob backend): the MPIJob's name, which the pod mutating webhook's
# objectSelector matches, and what it adds to ``batch.kubernetes.io/job-completion-index`` to make the rank label
# ``training.kubeflow.org/replica-index`` ("1" under runLauncherAsWorker, where the launcher is rank 0).
WORKER_JOB_LABEL: Final = "mpijobs.kubeflow.org/worker-job"
REPLICA_INDEX_OFFSET_ANNOTATION: Final = "mpijobs.kubeflow.org/replica-index-offset"
JOB_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"  # the Job controller's label and annotation
_MAX_INDEX = 2**31 - 1  # a Job's completions are an int32


def worker_job_name(job_name: str) -> str:
    """The worker Job of the IndexedJob backend, ``<job>-worker``: its pods' hostnames are ``<job>-worker-<index>``."""
    return job_name + c.WORKER_SUFFIX


def _index_value(value: object) -> int | None:
    """A non-negative decimal integer as the Job controller writes it (no sign, no leading zero), else None."""
    if not isinstance(value, str) or not 0 < len(value) <= len(str(_MAX_INDEX)) or not value.isascii():
        return None  # (an annotation may hold 256 KiB of digits: more than int() converts)
    if not value.isdigit() or value != str(int(value)):
        return None
    number = int(value)
    return number if number <= _MAX_INDEX else None


def pod_replica_index(pod: JSONDict) -> tuple[int | None, str]:
    """The rank label (``training.kubeflow.org/replica-index``) of a worker Job's pod: its completion index (label, else
    annotation, ``batch.kubernetes.io/job-completion-index``) plus its ``mpijobs.kubeflow.org/replica-index-offset``
    annotation (0 when absent); or None and why there is none: ``no_index``, ``malformed_index``,
    ``malformed_offset``."""
    labels = object_at(pod, "metadata", "labels") or {}
    annotations = object_at(pod, "metadata", "annotations") or {}
    raw = labels.get(JOB_COMPLETION_INDEX, annotations.get(JOB_COMPLETION_INDEX))
    if raw is None:
        return None, "no_index"
    index = _index_value(raw)
    if index is None:
        return None, "malformed_index"
    raw_offset = annotations.get(REPLICA_INDEX_OFFSET_ANNOTATION, "0")
    offset = _index_value(raw_offset)
    if offset is None:
        return None, "malformed_offset"
    return index + offset, ""
