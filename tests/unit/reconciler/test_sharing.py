"""Slim pods share the parts that many pods have alike, and a shared part lives only while a pod holds it."""

from __future__ import annotations

import gc

from reconciler.mpijob.caches import slim_pod
from reconciler.runtime import sharing
from shared.api import constants as c
from shared.jsondict import JSONDict

RUNNING = {"phase": "Running", "podIP": "10.0.0.1", "conditions": [
    {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True", "lastTransitionTime": "t"}]}


def worker(index: int, status: JSONDict, job: str = "pi", uid: str = "uid-1") -> JSONDict:
    return {"kind": "Pod", "metadata": {
        "name": f"{job}-worker-{index}", "namespace": "default", "uid": f"pod-{index}", "resourceVersion": str(index),
        "labels": {c.LABEL_OPERATOR_NAME: c.OPERATOR_NAME, c.LABEL_JOB_NAME: job, c.LABEL_JOB_ROLE: c.ROLE_WORKER,
                   c.LABEL_REPLICA_INDEX: str(index), "user": "x"},
        "ownerReferences": [{"apiVersion": f"{c.GROUP}/{c.VERSION}", "kind": c.KIND, "name": job, "uid": uid,
                             "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"containers": [{"name": "w"}]}, "status": status}


def slim(index: int, status: JSONDict, **kwargs: str) -> JSONDict:
    found = slim_pod(worker(index, status, **kwargs))
    assert found is not None
    return found


def test_workers_of_a_job_share_labels_owner_and_status() -> None:
    first, second = slim(0, RUNNING), slim(1, RUNNING)
    assert first["metadata"]["labels"] is second["metadata"]["labels"]
    assert first["metadata"]["ownerReferences"] is second["metadata"]["ownerReferences"]
    assert first["status"] is second["status"]
    assert first["metadata"]["labels"] == {c.LABEL_OPERATOR_NAME: c.OPERATOR_NAME, c.LABEL_JOB_NAME: "pi",
                                           c.LABEL_JOB_ROLE: c.ROLE_WORKER}
    assert first["metadata"]["ownerReferences"] == [{"apiVersion": f"{c.GROUP}/{c.VERSION}", "kind": c.KIND,
                                                     "name": "pi", "uid": "uid-1", "controller": True}]
    assert first["status"] == {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    assert (first["metadata"]["name"], second["metadata"]["name"]) == ("pi-worker-0", "pi-worker-1")


def test_different_values_are_not_shared() -> None:
    pending = slim(0, {"phase": "Pending"})
    running = slim(1, RUNNING)
    other_job = slim(0, RUNNING, job="other", uid="uid-2")
    assert pending["status"] == {"phase": "Pending"}
    assert running["status"] is not pending["status"]
    assert other_job["metadata"]["labels"] is not running["metadata"]["labels"]
    assert other_job["metadata"]["ownerReferences"][0]["uid"] == "uid-2"


def test_a_shared_value_goes_with_its_last_holder() -> None:
    gc.collect()
    before = sharing.live_values()
    status = {"phase": "Failed", "reason": "OnlyInThisTest"}
    pods = [slim(i, status, job="gone", uid="uid-gone") for i in range(3)]
    assert sharing.live_values() == before + 3  # labels, owner, status: once for the three pods
    del pods
    gc.collect()
    assert sharing.live_values() == before
