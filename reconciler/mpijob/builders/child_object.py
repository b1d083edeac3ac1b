"""What every child object shares: metadata in the job's namespace with the job as its controller, and the
merge patch that converges one that drifted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.api import constants as c
from shared.api.types import MPIJob
from shared.jsondict import JSONDict


def controller_ref(job: MPIJob) -> JSONDict:
    """The controller ownerReference every child carries (Go's ``metav1.NewControllerRef``)."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "name": job.name,
        "uid": job.metadata.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def app_labels(job: MPIJob) -> dict[str, str]:
    """``{app: <job>}``: the labels of the Service, ConfigMap, Secret and launcher Job."""
    return {"app": job.name}


def object_meta(job: MPIJob, name: str, labels: dict[str, str] | None = None) -> JSONDict:
    """Metadata of a child object in the job's namespace, controlled by the job."""
    meta: JSONDict = {"name": name, "namespace": job.namespace}
    if labels:
        meta["labels"] = labels
    meta["ownerReferences"] = [controller_ref(job)]
    return meta


def replacing_merge_patch(have: Mapping[str, Any] | None, want: Mapping[str, Any]) -> JSONDict:
    """The JSON merge patch (RFC 7386) value that turns the map ``have`` into exactly ``want``.

    A merge patch merges maps key by key, so keys ``have`` has and ``want`` lacks are set to null (removed).
    """
    return {**dict.fromkeys((key for key in have or {} if key not in want), None), **want}
