"""Admission warnings: likely mistakes that are allowed, reported as ``Warning:`` lines by kubectl.

Each warning is one short sentence (kubectl and the API server truncate long ones) that names the
field and says what will happen.
"""

from __future__ import annotations

from typing import Any

from shared.api import constants as c
from shared.api.kueue_topology import kueue_topology_warnings
from shared.api.readiness_probe import readiness_probe_warnings
from shared.api.types import MPIJob, ReplicaSpec

GPU_RESOURCE_SUFFIX = "/gpu"


def admission_warnings(job: MPIJob) -> list[str]:
    """Warnings for a defaulted MPIJob."""
    return (_ssh_path_warnings(job) + _slots_warnings(job) + _restart_policy_warnings(job)
            + kueue_topology_warnings(job) + readiness_probe_warnings(job))


def _ssh_path_warnings(job: MPIJob) -> list[str]:
    path = job.spec.ssh_auth_mount_path if job.spec else None
    if not path or not (path == c.ROOT_SSH_PATH or path.startswith("/root/")):
        return []
    warnings = []
    for replica_type in c.REPLICA_TYPES:
        spec = job.replica_spec(replica_type)
        if spec and _runs_as_non_root(spec):
            warnings.append(
                f"spec.sshAuthMountPath: {path} is under /root but the {replica_type} pods run as a non-root "
                "user, who cannot read it: set sshAuthMountPath to that user's ~/.ssh"
            )
    return warnings


def _runs_as_non_root(spec: ReplicaSpec) -> bool:
    pod_spec = _dict((spec.template or {}).get("spec"))
    pod_context = _dict(pod_spec.get("securityContext"))
    containers = spec.containers()
    container_context = _dict(containers[0].get("securityContext")) if containers and isinstance(
        containers[0], dict) else {}
    user = container_context.get("runAsUser", pod_context.get("runAsUser"))
    if isinstance(user, int) and not isinstance(user, bool):
        return user != 0
    return container_context.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is True


def _slots_warnings(job: MPIJob) -> list[str]:
    worker = job.replica_spec(c.WORKER)
    slots = job.spec.slots_per_worker if job.spec else None
    if worker is None or slots is None:
        return []
    gpus = _gpus_per_pod(worker)
    if gpus in (0, slots):
        return []
    return [
        f"spec.slotsPerWorker: {slots} slot(s) per worker but each worker requests {gpus} GPU(s): "
        f"set slotsPerWorker to {gpus} to run one process per GPU"
    ]


def _gpus_per_pod(spec: ReplicaSpec) -> int:
    total = 0
    for container in spec.containers():
        resources = _dict(_dict(container).get("resources"))
        limits = _dict(resources.get("limits")) or _dict(resources.get("requests"))
        for name, quantity in limits.items():
            if name.endswith(GPU_RESOURCE_SUFFIX):
                total += _as_int(quantity)
    return total


def _restart_policy_warnings(job: MPIJob) -> list[str]:
    warnings = []
    for replica_type in c.REPLICA_TYPES:
        spec = job.replica_spec(replica_type)
        template_policy = _dict(_dict(spec.template if spec else None).get("spec")).get("restartPolicy")
        if spec and template_policy and template_policy != spec.restart_policy:
            warnings.append(
                f"spec.mpiReplicaSpecs[{replica_type}].template.spec.restartPolicy: {template_policy} is "
                f"overridden by the replica restartPolicy {spec.restart_policy}"
            )
    return warnings


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _as_int(quantity: Any) -> int:
    try:
        return int(str(quantity))
    except ValueError:
        return 0
