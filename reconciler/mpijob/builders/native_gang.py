"""Native gangs of kube-scheduler (Kubernetes 1.36, ``scheduling.k8s.io/v1alpha2``, GenericWorkload and
GangScheduling feature gates): a Workload with one pod group template and a PodGroup made from it, both
named after the job and owned by it; every pod names the PodGroup in ``spec.schedulingGroup``.

The alpha's rules (k8s.io/api scheduling/v1alpha2): a Workload's ``controllerRef`` and ``podGroupTemplates``
and a PodGroup's ``podGroupTemplateRef`` and ``schedulingPolicy`` are immutable, so a changed gang size is
a new pair of objects; ``gang.minCount`` must be positive, so a gang of 0 (``minAvailable: 0``) is the
``basic`` policy (no gang). A pod's ``schedulingGroup`` is immutable too, and the PodGroup it names may be
created after it.
"""

from __future__ import annotations

from reconciler.mpijob.builders.child_object import object_meta
from reconciler.mpijob.builders.job_facts import calculate_min_available
from shared.api import constants as c
from shared.api import names
from shared.api.types import MPIJob
from shared.jsondict import JSONDict

NATIVE = "kube-scheduler"
NATIVE_API_VERSION = "scheduling.k8s.io/v1alpha2"
WORKLOAD_KIND = "Workload"
TEMPLATE_NAME = "mpijob"  # the one pod group template of the job's Workload
NATIVE_POD_GROUP_FIELDS = ("podGroupTemplateRef", "schedulingPolicy")
WORKLOAD_FIELDS = ("controllerRef", "podGroupTemplates")


def scheduling_policy(job: MPIJob) -> JSONDict:
    """``gang`` with the job's gang size as ``minCount``, or ``basic`` when that size is 0."""
    min_count = calculate_min_available(job)
    return {"gang": {"minCount": min_count}} if min_count > 0 else {"basic": {}}


def build_workload(job: MPIJob) -> JSONDict:
    """The job's Workload: its controllerRef names the MPIJob, its one template carries the gang policy."""
    name = names.pod_group_name(job.name)
    return {
        "apiVersion": NATIVE_API_VERSION,
        "kind": WORKLOAD_KIND,
        "metadata": object_meta(job, name),
        "spec": {
            "controllerRef": {"apiGroup": c.GROUP, "kind": c.KIND, "name": job.name},
            "podGroupTemplates": [{"name": TEMPLATE_NAME, "schedulingPolicy": scheduling_policy(job)}],
        },
    }


def build_native_pod_group(job: MPIJob) -> JSONDict:
    """The job's PodGroup, made from its Workload's template (the policy copied, as the alpha expects)."""
    name = names.pod_group_name(job.name)
    return {
        "apiVersion": NATIVE_API_VERSION,
        "kind": "PodGroup",
        "metadata": object_meta(job, name),
        "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": name, "podGroupTemplateName": TEMPLATE_NAME}},
            "schedulingPolicy": scheduling_policy(job),
        },
    }


def decorate_native(template: JSONDict, job_name: str) -> None:
    """Name the job's PodGroup in the pod template's ``schedulingGroup``; the scheduler name stays."""
    spec = template["spec"] = template.get("spec") or {}
    spec["schedulingGroup"] = {"podGroupName": names.pod_group_name(job_name)}


def _without_nulls(value: object) -> object:
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def native_spec_differs(current: JSONDict, desired: JSONDict, kind: str) -> bool:
    """Whether a stored ``Workload`` or ``PodGroup`` spec differs from ours in a field we set. Fields the
    server adds (``disruptionMode: Pod``, ``schedulingConstraints: null`` in a template) are no difference."""
    fields = WORKLOAD_FIELDS if kind == WORKLOAD_KIND else NATIVE_POD_GROUP_FIELDS
    return any(_without_nulls(current.get(f)) != _without_nulls(desired.get(f)) for f in fields)
