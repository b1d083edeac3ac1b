"""What the reconciler caches of each resource: only the fields it reads (slim objects).

Each ``slim_*`` returns None for objects the reconciler does not manage, which are then not cached at
all; objects with our names that we do not control are found by the 409 of a create instead.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconciler.mpijob.custom_resources import owned_by_mpijob
from reconciler.runtime.metadata import controller_of
from reconciler.runtime.sharing import SharedDict, SharedList, shared
from reconciler.runtime.store import PackedStore, Store
from shared.api import constants as c
from shared.api.worker_backend import JOB_COMPLETION_INDEX
from shared.jsondict import JSONDict

Slimmer = Callable[[JSONDict], JSONDict | None]
_POD_META_KEYS = ("name", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp")
_POD_SHARED_META = ("creationTimestamp", "deletionTimestamp")
# what names.role_selector selects on, the attempt of a job with a failurePolicy (failure_policy.py), and the index
# of a worker Job's pod (IndexedJob backend; plain workers have no such label: theirs are shared as before)
_POD_LABELS = (c.LABEL_OPERATOR_NAME, c.LABEL_JOB_NAME, c.LABEL_JOB_ROLE, c.RESTART_ATTEMPT_LABEL,
               JOB_COMPLETION_INDEX)
# a worker Job's pod also keeps its rank label, which the webhook's pod mutation adds (the sync says when one has none)
_JOB_POD_LABELS = (*_POD_LABELS, c.LABEL_REPLICA_INDEX)
_REF_KEYS = ("apiVersion", "kind", "name", "uid", "controller")
_CAUSE_LIMIT = 1024  # a pending cause longer than a condition message is cut
_META_KEYS = ("name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences", "creationTimestamp",
              "deletionTimestamp")


def _slim_meta(obj: JSONDict) -> JSONDict:
    metadata = obj.get("metadata") or {}
    return {key: metadata[key] for key in _META_KEYS if key in metadata}


def _interned(value: Any) -> Any:
    return sys.intern(value) if isinstance(value, str) else value


def _slim_pod_meta(obj: JSONDict, ref: JSONDict) -> JSONDict:
    """Pods are most of the cache: only the labels we select on and only the controller reference, both
    kept once for all the pods that have the same (``sharing.py``), the namespace and timestamps interned."""
    metadata = obj.get("metadata") or {}
    slim = {key: metadata[key] for key in _POD_META_KEYS if key in metadata}
    for key in _POD_SHARED_META:  # a burst of creates gives hundreds of pods the same second
        if key in slim:
            slim[key] = _interned(slim[key])
    slim["namespace"] = _interned(metadata.get("namespace", ""))
    labels = metadata.get("labels") or {}
    keys = _JOB_POD_LABELS if JOB_COMPLETION_INDEX in labels else _POD_LABELS
    selected = tuple((key, _interned(labels[key])) for key in keys if key in labels)
    slim["labels"] = shared(("labels", selected), lambda: SharedDict(selected))
    owner = tuple((key, _interned(ref[key])) for key in _REF_KEYS if key in ref)
    slim["ownerReferences"] = shared(("owner", owner), lambda: SharedList([dict(owner)]))
    return slim


def pending_cause(status: JSONDict) -> tuple[str, str] | None:
    """Why a pod that is not ready waits, as (reason, message): the scheduler's PodScheduled=False, else a
    container's waiting state (an error such as ImagePullBackOff before ContainerCreating); None if neither."""
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("reason") or "Unschedulable"), str(cond.get("message") or "")
    waiting = [state["waiting"] for key in ("initContainerStatuses", "containerStatuses")
               for container in status.get(key) or [] if isinstance(state := container.get("state"), dict)
               and isinstance(state.get("waiting"), dict) and state["waiting"].get("reason")]
    errors = [w for w in waiting if w["reason"] not in ("ContainerCreating", "PodInitializing")]
    for found in errors or waiting:
        return str(found["reason"]), str(found.get("message") or "")
    return None


def slim_pod(obj: JSONDict) -> JSONDict | None:
    ref = controller_of(obj)
    if ref is None or not (owned_by_mpijob(obj) or ref.get("kind") == "Job"):
        return None
    metadata = _slim_pod_meta(obj, ref)
    slim: JSONDict = {"kind": "Pod", "metadata": metadata, "status": _slim_pod_status(obj)}
    if JOB_COMPLETION_INDEX in metadata["labels"]:  # a worker Job's pod: discover_hosts.sh lists its hostname
        hostname = (obj.get("spec") or {}).get("hostname")
        if isinstance(hostname, str):
            slim["spec"] = {"hostname": sys.intern(hostname)}
    return slim


def _failure_status(obj: JSONDict) -> JSONDict | None:
    """What a failurePolicy rule reads of a failed pod, or of one being deleted with DisruptionTarget=True, of a
    job with a failurePolicy (its pods carry the attempt label; few pods, each its own): every condition and the
    terminated state of every container; None for other pods."""
    if c.RESTART_ATTEMPT_LABEL not in ((obj.get("metadata") or {}).get("labels") or {}):
        return None
    status = obj.get("status") or {}
    conditions = [{key: cond[key] for key in ("type", "status", "reason", "message", "lastTransitionTime")
                   if key in cond} for cond in status.get("conditions") or []]
    disrupted = any(cond.get("type") == c.POD_DISRUPTION_TARGET and cond.get("status") == c.CONDITION_TRUE
                    for cond in conditions)
    if status.get("phase") != "Failed" and not ((obj.get("metadata") or {}).get("deletionTimestamp") and disrupted):
        return None
    slim: JSONDict = {key: status[key] for key in ("phase", "reason", "message") if key in status}
    slim["conditions"] = conditions
    for key in ("initContainerStatuses", "containerStatuses"):
        slim[key] = [{"name": container.get("name", ""), "state": {"terminated": {
            k: terminated[k] for k in ("exitCode", "finishedAt") if k in terminated}}}
            for container in status.get(key) or []
            if isinstance(terminated := (container.get("state") or {}).get("terminated"), dict)]
    return slim


def _slim_pod_status(obj: JSONDict) -> JSONDict:
    """Phase, reason, message, the Ready condition and a worker's pending cause: most pods of a job have the
    same, which is kept once. A failed or disrupted pod keeps what a failurePolicy reads (``_failure_status``)."""
    if (failure := _failure_status(obj)) is not None:
        return failure
    status = obj.get("status") or {}
    fields = tuple((key, _interned(status[key])) for key in ("phase", "reason", "message") if key in status)
    ready = [cond for cond in status.get("conditions") or [] if cond.get("type") == "Ready"]
    ready_status = _interned(ready[0].get("status")) if ready else None
    cause = None
    if ready_status != "True" and owned_by_mpijob(obj):  # workers: why not ready
        found = pending_cause(status)
        if found is not None:  # the same cause is shared by many pods: one copy of its strings
            cause = (sys.intern(found[0][:_CAUSE_LIMIT]), sys.intern(found[1][:_CAUSE_LIMIT]))

    def make() -> SharedDict:
        slim = SharedDict(fields)
        if ready:
            slim["conditions"] = [{"type": "Ready", "status": ready_status}]
        if cause is not None:
            slim["cause"] = cause
        return slim

    return shared(("pod-status", fields, bool(ready), ready_status, cause), make)


def slim_job(obj: JSONDict) -> JSONDict | None:
    if not owned_by_mpijob(obj):
        return None
    status = obj.get("status") or {}
    # completedIndexes: a worker Job's indexes that ended Succeeded, which the Job controller never makes again
    keep = ("conditions", "failed", "succeeded", "active", "startTime", "completionTime", "completedIndexes")
    spec = {"suspend": bool((obj.get("spec") or {}).get("suspend"))}
    if (obj.get("spec") or {}).get("completionMode") == "Indexed":  # a worker Job: its size, which a scale patches
        spec.update((key, obj["spec"][key]) for key in ("completionMode", "parallelism", "completions")
                    if key in obj["spec"])
    return {"kind": "Job", "metadata": _slim_meta(obj), "spec": spec,
            "status": {key: status[key] for key in keep if key in status}}


def slim_service(obj: JSONDict) -> JSONDict | None:
    if not owned_by_mpijob(obj):
        return None
    spec = obj.get("spec") or {}
    return {"kind": "Service", "metadata": _slim_meta(obj),
            "spec": {key: spec[key] for key in ("selector", "publishNotReadyAddresses", "clusterIP") if key in spec}}


def slim_config_map(obj: JSONDict) -> JSONDict | None:
    if not owned_by_mpijob(obj):
        return None
    return {"kind": "ConfigMap", "metadata": _slim_meta(obj), "data": dict(obj.get("data") or {})}


def slim_secret(obj: JSONDict) -> JSONDict | None:
    """Secrets keep their key names only: key material never sits in the cache."""
    if not owned_by_mpijob(obj):
        return None
    return {"kind": "Secret", "metadata": _slim_meta(obj), "type": obj.get("type", ""),
            "data": dict.fromkeys(obj.get("data") or {}, "")}


def slim_pod_group(obj: JSONDict) -> JSONDict | None:
    """PodGroups (every flavour) and native Workloads: the metadata and the spec."""
    if not owned_by_mpijob(obj):
        return None
    return {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind") or "PodGroup",
            "metadata": _slim_meta(obj), "spec": dict(obj.get("spec") or {})}


def slim_mpijob(obj: JSONDict) -> JSONDict | None:
    """The whole MPIJob but its managedFields (often larger than the spec, and never read)."""
    metadata = obj.get("metadata") or {}
    if "managedFields" not in metadata:
        return obj
    return {**obj, "metadata": {key: value for key, value in metadata.items() if key != "managedFields"}}


@dataclass(frozen=True)
class Caches:
    """The stores the sync loop reads, each filled by one informer (``Controller``), each of the kind that suits
    how a sync reads it."""

    # MPIJobs carry whole pod templates and are read once per sync: kept as JSON bytes
    mpijobs: Store = field(default_factory=PackedStore)
    # a sync reads the pods of its job several times: indexed by job and role, never a scan of the namespace
    pods: Store = field(default_factory=lambda: Store(index_labels=(c.LABEL_JOB_NAME, c.LABEL_JOB_ROLE)))
    # one of each per job, read a few times per sync: JSON bytes too (a third of their dicts' memory)
    jobs: Store = field(default_factory=PackedStore)
    services: Store = field(default_factory=PackedStore)
    config_maps: Store = field(default_factory=PackedStore)
    secrets: Store = field(default_factory=PackedStore)
    pod_groups: Store = field(default_factory=Store)  # only with --gang-scheduling
    workloads: Store = field(default_factory=Store)  # only with --gang-scheduling=kube-scheduler
