"""Which worker backend runs a job's workers, chosen once and kept (docs/reconciler.md, "Worker backends").

A job keeps the backend its objects were made with, whatever ``--default-worker-backend`` says now: an admin who
flips the flag never orphans a running job, nor moves a suspended or restarting one. What the caches show decides,
in this order: a worker Job ``<job>-worker`` the MPIJob controls (IndexedJob); the job's Service, which the
reconciler labels ``mpijobs.kubeflow.org/worker-backend: IndexedJob`` when it makes it for an IndexedJob job and
leaves as upstream's otherwise (so an unlabelled Service, ours or the Go operator's, means Pods); worker pods the
MPIJob controls (Pods). A job with none of them (its first sync) gets its annotation's backend, else the flag's.
"""

from __future__ import annotations

from typing import Final

from reconciler.mpijob.caches import Caches
from reconciler.runtime.metadata import is_controlled_by, meta
from shared.api import constants as c
from shared.api import names
from shared.api.worker_backend import (
    WORKER_BACKEND_ANNOTATION,
    WORKER_BACKEND_INDEXED_JOB,
    WORKER_BACKEND_PODS,
    worker_backend_of,
    worker_job_name,
)
from shared.jsondict import JSONDict

SERVICE_BACKEND_LABEL: Final = WORKER_BACKEND_ANNOTATION  # on the Service of an IndexedJob job, value IndexedJob


def chosen_worker_backend(cached: JSONDict, caches: Caches, default: str) -> str:
    """The backend of the stored MPIJob ``cached``: the one its existing objects were made with, else its
    annotation's, else ``default`` (the operator's flag)."""
    metadata = meta(cached)
    namespace, name, uid = str(metadata.get("namespace", "")), str(metadata.get("name", "")), str(metadata.get("uid"))
    worker_job = caches.jobs.get(namespace, worker_job_name(name))
    if worker_job is not None and is_controlled_by(worker_job, uid):
        return WORKER_BACKEND_INDEXED_JOB
    service = caches.services.get(namespace, names.service_name(name))
    if service is not None and is_controlled_by(service, uid):
        labels = meta(service).get("labels") or {}
        indexed = labels.get(SERVICE_BACKEND_LABEL) == WORKER_BACKEND_INDEXED_JOB
        return WORKER_BACKEND_INDEXED_JOB if indexed else WORKER_BACKEND_PODS
    workers = caches.pods.select(namespace, names.role_selector(name, c.ROLE_WORKER))
    if any(is_controlled_by(pod, uid) for pod in workers):
        return WORKER_BACKEND_PODS
    return worker_backend_of(cached, default)


def with_backend_label(service: JSONDict, backend: str) -> JSONDict:
    """The job's Service to create, labelled with the backend when it is IndexedJob (else as upstream's)."""
    if backend != WORKER_BACKEND_INDEXED_JOB:
        return service
    metadata = service["metadata"]
    return {**service, "metadata": {**metadata, "labels": {**(metadata.get("labels") or {}),
                                                           SERVICE_BACKEND_LABEL: WORKER_BACKEND_INDEXED_JOB}}}
