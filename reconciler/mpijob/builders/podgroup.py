"""Gang scheduling: the PodGroup objects (Volcano or scheduler-plugins) and the pod decoration (controller.md 2.6).

The ``--gang-scheduling`` flag value selects the flavour: ``volcano`` means Volcano, ``kube-scheduler`` the
native gangs of Kubernetes 1.36 (``native_gang.py``; not an upstream value), any other non-empty value
scheduler-plugins with that value as the pods' scheduler name.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.mpijob.builders.child_object import object_meta
from reconciler.mpijob.builders.job_facts import calculate_min_available, run_policy_of
from reconciler.mpijob.builders.min_resources import PriorityLookup, calculate_min_resources, no_priority_classes
from reconciler.mpijob.builders.native_gang import (
    NATIVE,
    NATIVE_API_VERSION,
    NATIVE_POD_GROUP_FIELDS,
    build_native_pod_group,
    decorate_native,
)
from reconciler.mpijob.builders.quantity import QuantityError, parse_quantity
from shared.api import constants as c
from shared.api import names
from shared.api.types import MPIJob, SchedulingPolicy
from shared.jsondict import JSONDict

VOLCANO = "volcano"
VOLCANO_API_VERSION = "scheduling.volcano.sh/v1beta1"
SCHEDULER_PLUGINS_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
POD_GROUP_KIND = "PodGroup"
# The spec fields each flavour's builder writes: the only ones compared and replaced (schema defaults and
# fields other controllers set are left as they are).
VOLCANO_OWNED_FIELDS = ("minMember", "queue", "priorityClassName", "minResources")
SCHEDULER_PLUGINS_OWNED_FIELDS = ("minMember", "minResources", "scheduleTimeoutSeconds")


@dataclass(frozen=True)
class GangScheduling:
    """Gang-scheduling settings: the ``--gang-scheduling`` flag value (never empty)."""

    scheduler_name: str

    @property
    def is_volcano(self) -> bool:
        """Volcano, rather than scheduler-plugins."""
        return self.scheduler_name == VOLCANO

    @property
    def is_native(self) -> bool:
        """kube-scheduler's own gangs (Workload and PodGroup of ``scheduling.k8s.io/v1alpha2``)."""
        return self.scheduler_name == NATIVE

    @property
    def api_version(self) -> str:
        """The PodGroup group/version of this flavour."""
        if self.is_native:
            return NATIVE_API_VERSION
        return VOLCANO_API_VERSION if self.is_volcano else SCHEDULER_PLUGINS_API_VERSION

    @property
    def owned_fields(self) -> tuple[str, ...]:
        """The PodGroup spec fields this flavour's builder writes."""
        if self.is_native:
            return NATIVE_POD_GROUP_FIELDS
        return VOLCANO_OWNED_FIELDS if self.is_volcano else SCHEDULER_PLUGINS_OWNED_FIELDS

    @classmethod
    def from_flag(cls, value: str) -> GangScheduling | None:
        """None when the flag is empty (gang scheduling off)."""
        return cls(value) if value else None


def decorate_pod_template(template: JSONDict, job_name: str, gang: GangScheduling) -> None:
    """Point a pod template (a builder's private copy: it is changed in place) at the gang scheduler.

    Volcano: ``schedulerName: volcano`` and annotation ``scheduling.k8s.io/group-name``; scheduler-plugins:
    the flag's scheduler name and label ``scheduling.x-k8s.io/pod-group``; native: ``spec.schedulingGroup``.
    Each names the PodGroup.
    """
    if gang.is_native:
        decorate_native(template, job_name)
        return
    spec = template["spec"] = template.get("spec") or {}
    meta = template["metadata"] = template.get("metadata") or {}
    spec["schedulerName"] = gang.scheduler_name
    key, mark = ("annotations", c.VOLCANO_GROUP_NAME_ANNOTATION) if gang.is_volcano else (
        "labels", c.SCHEDULER_PLUGINS_POD_GROUP_LABEL)
    meta[key] = {**(meta.get(key) or {}), mark: names.pod_group_name(job_name)}


def overridden_scheduler_name(template: JSONDict | None, gang: GangScheduling) -> str | None:
    """The template's own scheduler name when gang scheduling replaces it (upstream logs a warning)."""
    if gang.is_native:
        return None
    spec = (template or {}).get("spec") or {}
    name = spec.get("schedulerName") or ""
    return None if name == gang.scheduler_name else name


def _scheduling_policy(job: MPIJob) -> SchedulingPolicy:
    return run_policy_of(job).scheduling_policy or SchedulingPolicy()


def calc_priority_class_name(job: MPIJob) -> str:
    """First non-empty of schedulingPolicy.priorityClass, Launcher then Worker template priorityClassName."""
    if _scheduling_policy(job).priority_class:
        return _scheduling_policy(job).priority_class or ""
    for replica_type in c.REPLICA_TYPES:
        spec = job.replica_spec(replica_type)
        pod_spec = ((spec.template or {}).get("spec") if spec is not None else None) or {}
        name = pod_spec.get("priorityClassName") if isinstance(pod_spec, dict) else None
        if isinstance(name, str) and name:
            return name
    return ""


def volcano_queue(job: MPIJob) -> str:
    """``schedulingPolicy.queue`` if non-empty, else the job's ``scheduling.volcano.sh/queue-name`` annotation."""
    queue = _scheduling_policy(job).queue
    if queue:
        return queue
    annotations = job.metadata.get("annotations") or {}
    value = annotations.get(c.VOLCANO_QUEUE_ANNOTATION, "") if isinstance(annotations, dict) else ""
    return value if isinstance(value, str) else ""


def _pod_group(job: MPIJob, api_version: str, spec: JSONDict) -> JSONDict:
    return {
        "apiVersion": api_version,
        "kind": POD_GROUP_KIND,
        "metadata": object_meta(job, names.pod_group_name(job.name)),
        "spec": spec,
    }


def build_volcano_pod_group(job: MPIJob, priority_of: PriorityLookup = no_priority_classes) -> JSONDict:
    """The ``scheduling.volcano.sh/v1beta1`` PodGroup; empty fields are left out as Go's omitempty does
    (but a computed empty ``minResources`` stays ``{}``: Go sends a pointer to an empty list).
    """
    min_member = calculate_min_available(job)
    spec: JSONDict = {}
    if min_member:
        spec["minMember"] = min_member
    if queue := volcano_queue(job):
        spec["queue"] = queue
    if priority_class := calc_priority_class_name(job):
        spec["priorityClassName"] = priority_class
    min_resources = calculate_min_resources(job, min_member, priority_of)
    if min_resources is not None:
        spec["minResources"] = min_resources
    return _pod_group(job, VOLCANO_API_VERSION, spec)


def build_scheduler_plugins_pod_group(job: MPIJob, priority_of: PriorityLookup = no_priority_classes) -> JSONDict:
    """The ``scheduling.x-k8s.io/v1alpha1`` PodGroup: minMember, minResources, scheduleTimeoutSeconds (0 default)."""
    min_member = calculate_min_available(job)
    spec: JSONDict = {}
    if min_member:
        spec["minMember"] = min_member
    min_resources = calculate_min_resources(job, min_member, priority_of)
    if min_resources:
        spec["minResources"] = min_resources
    timeout = _scheduling_policy(job).schedule_timeout_seconds
    spec["scheduleTimeoutSeconds"] = timeout if timeout is not None else 0
    return _pod_group(job, SCHEDULER_PLUGINS_API_VERSION, spec)


def build_pod_group(job: MPIJob, gang: GangScheduling, priority_of: PriorityLookup = no_priority_classes) -> JSONDict:
    """The PodGroup of the configured flavour."""
    if gang.is_native:
        return build_native_pod_group(job)
    build = build_volcano_pod_group if gang.is_volcano else build_scheduler_plugins_pod_group
    return build(job, priority_of)


def _normalised(field: str, value: object) -> object:
    """A spec field's value for comparison: quantities by value, Go's zero value for an absent field."""
    if field == "minResources":
        if not isinstance(value, dict):
            return {} if value is None else value
        try:
            return {name: parse_quantity(quantity).nanos for name, quantity in value.items()}
        except QuantityError:
            return value
    if value is None:
        return "" if field in ("queue", "priorityClassName") else 0
    return value


def pod_group_spec_update(current: JSONDict, desired: JSONDict, gang: GangScheduling) -> JSONDict | None:
    """The spec to write when ``current`` differs from ``desired`` in a field we own, else None.

    Quantities compare by value (``1000m`` is ``1``) and an absent field as its zero value, so a PodGroup
    another writer stored in a different spelling is not rewritten on every sync. The spec written keeps the
    fields we do not own.
    """
    owned = gang.owned_fields
    if all(_normalised(f, current.get(f)) == _normalised(f, desired.get(f)) for f in owned):
        return None
    return {**{key: value for key, value in current.items() if key not in owned}, **desired}
