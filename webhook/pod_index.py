"""The pod mutating webhook of the IndexedJob worker backend (``POST /mutate--v1-pod``): pure, no I/O.

A worker Job's pods carry ``batch.kubernetes.io/job-completion-index`` but not upstream's rank label
``training.kubeflow.org/replica-index``, which a Job's one template cannot set per index and Kueue's Topology Aware
Scheduling orders ranks by. This adds it, the index plus the template's ``mpijobs.kubeflow.org/replica-index-offset``
annotation, as a JSON patch. Its configuration selects only pods with the label ``mpijobs.kubeflow.org/worker-job``
and ignores its failures; it never denies a pod either: one without a valid index is allowed unchanged, and the
answer says why (``Admission.skipped``) for the log line and ``mpijob_webhook_replica_index_skipped_total``.
"""

from __future__ import annotations

import base64

import orjson

from shared.api import constants as c
from shared.api.worker_backend import pod_replica_index
from shared.jsondict import JSONDict, object_at
from webhook.admission import Admission

_LABELS_POINTER = "/metadata/labels"
_RANK_POINTER = f"{_LABELS_POINTER}/" + c.LABEL_REPLICA_INDEX.replace("~", "~0").replace("/", "~1")


def replica_index_patch(pod: JSONDict) -> tuple[list[JSONDict], str]:
    """The JSON patch that gives ``pod`` its rank label ([] when it has it already), or [] and why it cannot."""
    index, problem = pod_replica_index(pod)
    if index is None:
        return [], problem
    labels = object_at(pod, "metadata", "labels")
    if labels is None:  # not a worker Job's pod (the objectSelector needs a label), but a patch must still apply
        return [{"op": "add", "path": _LABELS_POINTER, "value": {c.LABEL_REPLICA_INDEX: str(index)}}], ""
    if labels.get(c.LABEL_REPLICA_INDEX) == str(index):
        return [], ""
    return [{"op": "add", "path": _RANK_POINTER, "value": str(index)}], ""  # add replaces a member that exists


def mutate_pod(request: JSONDict) -> Admission:
    """Allow a pod, with its rank label added when it is a pod CREATE that has a valid completion index."""
    allowed = Admission({"uid": request["uid"], "allowed": True}, "allowed")
    kind = request.get("kind")
    if request["operation"] != "CREATE" or request.get("subResource") or kind != _POD_KIND:
        if request["operation"] == "CREATE" and not request.get("subResource"):
            allowed.skipped = "not_a_pod"  # the configuration's rules send only pods: say so in the log
        return allowed
    patch, problem = replica_index_patch(request["object"])
    if not patch:
        allowed.skipped = problem
        return allowed
    encoded = base64.b64encode(orjson.dumps(patch)).decode()
    response = {"uid": request["uid"], "allowed": True, "patchType": "JSONPatch", "patch": encoded}
    return Admission(response, "patched", patch_ops=len(patch))


_POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}
