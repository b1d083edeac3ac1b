"""The headless Service that gives every launcher and worker pod a stable DNS name (controller.md 2.1)."""

from __future__ import annotations

from reconciler.mpijob.builders.common import app_labels, object_meta, runs_launcher_as_worker
from shared.api import names
from shared.api.types import MPIJob
from shared.jsondict import JSONDict

CLUSTER_IP_NONE = "None"


def build_service(job: MPIJob) -> JSONDict:
    """Service ``<job>``: headless, no ports, selecting all the job's pods (launcher and workers).

    ``publishNotReadyAddresses: true`` only with runLauncherAsWorker, so the launcher resolves before it
    is Ready; otherwise the field is left out (Go's omitempty on ``false``).
    """
    spec: JSONDict = {"clusterIP": CLUSTER_IP_NONE, "selector": names.job_selector(job.name)}
    if runs_launcher_as_worker(job):
        spec["publishNotReadyAddresses"] = True
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(job, names.service_name(job.name), app_labels(job)),
        "spec": spec,
    }


def service_needs_update(existing: JSONDict, desired: JSONDict) -> bool:
    """Whether an owned Service's selector or publishNotReadyAddresses differ from the desired ones.

    Those two fields are all upstream reconciles; copy them from ``desired`` onto a copy and Update.
    """
    have, want = existing.get("spec") or {}, desired["spec"]
    return bool(have.get("selector") != want["selector"] or bool(
        have.get("publishNotReadyAddresses")) != bool(want.get("publishNotReadyAddresses")))
