"""The headless Service that gives every launcher and worker pod a stable DNS name (controller.md 2.1)."""

from __future__ import annotations

from reconciler.mpijob.builders.child_object import app_labels, object_meta, replacing_merge_patch
from reconciler.mpijob.builders.job_facts import runs_launcher_as_worker
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


def service_spec_patch(existing: JSONDict, desired: JSONDict) -> JSONDict | None:
    """The merge-patch ``spec`` that makes an owned Service's selector and publishNotReadyAddresses exactly
    the desired ones (extra selector keys removed), or None when they already are. Those two fields are
    all upstream reconciles."""
    have, want = existing.get("spec") or {}, desired["spec"]
    publish = bool(want.get("publishNotReadyAddresses"))
    if have.get("selector") == want["selector"] and bool(have.get("publishNotReadyAddresses")) == publish:
        return None
    return {"selector": replacing_merge_patch(have.get("selector"), want["selector"]),
            "publishNotReadyAddresses": True if publish else None}  # null: back to the API default, false
