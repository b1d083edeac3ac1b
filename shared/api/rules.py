"""Validation rules beyond upstream's (documented with their reasons in docs/validation.md)."""

from __future__ import annotations

from collections.abc import Callable

from shared.api import constants as c
from shared.api import dns, names
from shared.api import field_errors as fe
from shared.api.field_errors import FieldError
from shared.api.kueue_topology import kueue_topology_errors
from shared.api.types import MPIJob

NameCheck = Callable[[str], list[str]]


def extended_errors(job: MPIJob) -> list[FieldError]:
    """Errors upstream accepts but that leave a job that can never run as the user meant."""
    return (_launcher_creation_policy_errors(job) + _replica_type_errors(job) + _derived_name_errors(job)
            + kueue_topology_errors(job))


def update_errors(old: MPIJob, new: MPIJob) -> list[FieldError]:
    """Rules that compare an object with its previous version."""
    old_value = old.spec.run_policy.managed_by if old.spec and old.spec.run_policy else None
    new_value = new.spec.run_policy.managed_by if new.spec and new.spec.run_policy else None
    if old_value == new_value:
        return []
    return [fe.invalid("spec.runPolicy.managedBy", new_value, "field is immutable")]


def _launcher_creation_policy_errors(job: MPIJob) -> list[FieldError]:
    policy = job.spec.launcher_creation_policy if job.spec else None
    if policy is None or policy in c.LAUNCHER_CREATION_POLICIES:
        return []
    return [fe.not_supported("spec.launcherCreationPolicy", policy, c.LAUNCHER_CREATION_POLICIES)]


def _replica_type_errors(job: MPIJob) -> list[FieldError]:
    specs = job.spec.mpi_replica_specs if job.spec else None
    errors = []
    for key in specs or {}:
        if key in c.REPLICA_TYPES:
            continue
        supported = ", ".join(f'"{t}"' for t in c.REPLICA_TYPES)
        detail = f"supported values: {supported}"
        hint = _closest_replica_type(key)
        if hint:
            detail += f'; did you mean "{hint}"? (replica types are case-sensitive)'
        errors.append(fe.FieldError(fe.ErrorType.NOT_SUPPORTED, f"spec.mpiReplicaSpecs[{key}]", key, detail))
    return errors


def _closest_replica_type(key: str) -> str | None:
    folded = key.strip().lower().rstrip("s")
    for replica_type in c.REPLICA_TYPES:
        if folded == replica_type.lower():
            return replica_type
    return None


def _derived_objects(job: MPIJob) -> list[tuple[str, str, NameCheck]]:
    """(what, name, check) for every object or host name derived from the job's name."""
    name = job.name
    return [
        ("headless Service", names.service_name(name), dns.is_dns1035_label),
        ("ConfigMap", names.config_map_name(name), dns.is_dns1123_subdomain),
        ("Secret", names.ssh_secret_name(name), dns.is_dns1123_subdomain),
        ("launcher Job (its name is also a label value and the launcher's hostname)",
         names.launcher_name(name), dns.is_dns1123_label),
        ("worker hostname", last_worker_hostname(job), dns.is_dns1035_label),
    ]


def last_worker_hostname(job: MPIJob) -> str:
    """The longest worker hostname, the one upstream checks: ``<name>-worker-<R-1>``."""
    worker = job.replica_spec(c.WORKER)
    replicas = worker.replicas if worker and worker.replicas and worker.replicas > 0 else 1
    return names.worker_name(job.name, replicas - 1)


def _every_derived_name_valid(job: MPIJob) -> bool:
    """The common case, decided without checking each derived name: a job named by a DNS-1035 label gives a
    valid Service name, ConfigMap and Secret names (a label plus a lowercase suffix, far under 253 characters),
    and a valid launcher name and worker hostname as long as those two fit in a label's 63 characters."""
    name = job.name
    return (dns.is_plain_dns1035_label(name) and len(names.launcher_name(name)) <= dns.DNS1123_LABEL_MAX
            and len(last_worker_hostname(job)) <= dns.DNS1035_LABEL_MAX)


def _derived_name_errors(job: MPIJob) -> list[FieldError]:
    """Name the first derived object that could not be created.

    Upstream's own name rule (always first) already reports a bad worker hostname; this one adds the
    object that fails and is only emitted when it says more: for dotted names (valid object names for
    Kubernetes, but not for the Service and hostnames), or when upstream's rule passed.
    """
    if _every_derived_name_valid(job):
        return []
    upstream_passed = not dns.is_dns1035_label(last_worker_hostname(job))
    if not job.name or not (upstream_passed or "." in job.name):
        return []
    for what, derived, check in _derived_objects(job):
        problems = check(derived)
        if problems:
            detail = f'the {what} "{derived}" cannot be created: ' + ", ".join(problems)
            if "." in job.name:
                detail = "must not contain dots: " + detail
            return [fe.invalid("metadata.name", job.name, detail)]
    return []
