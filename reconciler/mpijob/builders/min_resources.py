"""The PodGroup ``minResources`` rule of upstream's ``calPGMinResource`` (controller.md 2.6).

Sum the container resources of the replicas that must start together, highest priority first, with the
lower-priority replica type cut so that the total pod count is ``minMember``. When the gang leaves the
launcher out (``WaitForWorkersReady``), only the workers count, cut to ``minMember``. PriorityClass values are
looked up through a caller-supplied function, so this stays pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from reconciler.mpijob.builders.job_facts import gang_includes_launcher, run_policy_of
from reconciler.mpijob.builders.quantity import Quantity, canonical, parse_quantity
from shared.api import constants as c
from shared.api.types import MPIJob, ReplicaSpec

PriorityLookup = Callable[[str], int | None]
"""PriorityClass name -> its value, or None when the class does not exist (counted as priority 0)."""

ResourceTotals = dict[str, Quantity]


def no_priority_classes(_name: str) -> int | None:
    """A ``PriorityLookup`` for a cluster without PriorityClasses."""
    return None


class ReplicaPriority(NamedTuple):
    """One replica type with the priority of its template's PriorityClass and its counted replicas."""

    replica_type: str
    priority: int
    replicas: int | None
    containers: list[Any]


def calculate_min_resources(job: MPIJob, min_member: int | None, priority_of: PriorityLookup) -> dict[str, str] | None:
    """``schedulingPolicy.minResources`` verbatim (canonical quantities) if set; None if ``min_member`` is 0;
    else the summed resources of the first ``min_member`` pods by priority.
    """
    policy = run_policy_of(job).scheduling_policy
    if policy is not None and policy.min_resources is not None:
        return {name: canonical(value) for name, value in sorted(policy.min_resources.items())}
    if min_member == 0:
        return None
    order = sort_by_priority(_replica_priorities(job, priority_of))
    if not order:
        return {}
    totals: ResourceTotals = {}
    for entry in _gang_members(job, order, min_member):
        if entry.replicas is None:
            continue
        for container in entry.containers:
            resources = container.get("resources") if isinstance(container, dict) else None
            add_resources(totals, resources or {}, entry.replicas)
    return {name: str(quantity) for name, quantity in sorted(totals.items())}


def _replica_priorities(job: MPIJob, priority_of: PriorityLookup) -> list[ReplicaPriority]:
    """Launcher then Worker (those present), each with its PriorityClass value (0 when unset or missing)."""
    entries = []
    for replica_type in c.REPLICA_TYPES:
        spec = job.replica_spec(replica_type)
        if spec is None:
            continue
        pod_spec = _pod_spec(spec)
        class_name = pod_spec.get("priorityClassName")
        priority = priority_of(class_name) if isinstance(class_name, str) and class_name else None
        entries.append(ReplicaPriority(replica_type, priority or 0, spec.replicas, spec.containers()))
    return entries


def sort_by_priority(entries: list[ReplicaPriority]) -> list[ReplicaPriority]:
    """Highest priority first; equal priorities keep their order."""
    return sorted(entries, key=lambda entry: -entry.priority)


def _gang_members(job: MPIJob, order: list[ReplicaPriority], min_member: int | None) -> list[ReplicaPriority]:
    """The replica types the gang counts, each with the replicas it counts."""
    if gang_includes_launcher(job):
        return _cut_to_min_member(order, min_member)
    workers = [entry for entry in order if entry.replica_type == c.WORKER]
    if min_member is None:
        return workers
    return [entry._replace(replicas=min(entry.replicas or 0, min_member)) for entry in workers]


def _cut_to_min_member(order: list[ReplicaPriority], min_member: int | None) -> list[ReplicaPriority]:
    """Reduce the lower-priority type (the Worker on a tie) to ``min_member - 1`` when there are more pods."""
    total = sum(entry.replicas or 0 for entry in order[:2])
    if min_member is None or total <= min_member or len(order) < 2:
        return order
    if order[0].priority == order[1].priority:
        cut = next((i for i, entry in enumerate(order) if entry.replica_type == c.WORKER), 1)
    else:
        cut = 1
    return [entry._replace(replicas=min_member - 1) if i == cut else entry for i, entry in enumerate(order)]


def add_resources(totals: ResourceTotals | None, resources: Mapping[str, Any], replicas: int) -> None:
    """Add a container's resources times ``replicas`` to ``totals`` (in place; None stays None).

    A container's resources are its requests plus every limit whose name has no request.
    """
    if totals is None:
        return
    merged = dict(resources.get("requests") or {})
    for name, limit in (resources.get("limits") or {}).items():
        merged.setdefault(name, limit)
    for name, value in merged.items():
        quantity = parse_quantity(value) * replicas
        totals[name] = totals[name] + quantity if name in totals else quantity


def _pod_spec(spec: ReplicaSpec) -> Mapping[str, Any]:
    pod_spec = (spec.template or {}).get("spec")
    return pod_spec if isinstance(pod_spec, dict) else {}
