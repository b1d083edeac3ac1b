"""The custom and alpha resources the MPIJob logic reads and writes (MPIJobs, the PodGroup flavours, the native
Workload), and whether an object is controlled by an MPIJob."""

from __future__ import annotations

from typing import TypeGuard

from reconciler.mpijob.builders.podgroup import GangScheduling
from reconciler.runtime.api_resources import Resource
from reconciler.runtime.metadata import controller_of
from shared.api import constants as c
from shared.jsondict import JSONDict

MPIJOBS = Resource(c.GROUP, c.VERSION, c.PLURAL, c.KIND)
VOLCANO_POD_GROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
SCHEDULER_PLUGINS_POD_GROUPS = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup")
NATIVE_POD_GROUPS = Resource("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup")  # native gangs
NATIVE_WORKLOADS = Resource("scheduling.k8s.io", "v1alpha2", "workloads", "Workload")


def is_mpijob_ref(ref: JSONDict | None) -> TypeGuard[JSONDict]:
    """True when an owner reference names an MPIJob (of any version of the group)."""
    return ref is not None and ref.get("kind") == c.KIND and str(ref.get("apiVersion", "")).startswith(c.GROUP + "/")


def owned_by_mpijob(obj: JSONDict) -> bool:
    """True when the object's controller is an MPIJob."""
    return is_mpijob_ref(controller_of(obj))


def pod_group_resource(gang: GangScheduling) -> Resource:
    """The PodGroup resource of a gang-scheduling flavour."""
    if gang.is_native:
        return NATIVE_POD_GROUPS
    return VOLCANO_POD_GROUPS if gang.is_volcano else SCHEDULER_PLUGINS_POD_GROUPS
