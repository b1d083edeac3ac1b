"""MPIJob validation: upstream's rules with their exact field paths, messages and order, then ours.

``validate_upstream`` is ``validation.ValidateMPIJob`` of mpi-operator v0.8.2, rule for rule.
``validate`` adds the checks upstream never had (see docs/validation.md); they come after upstream's,
so upstream's errors keep their positions. Neither applies defaults: callers validate the defaulted job
(``parse_mpijob(defaulted_dict(obj))``) as upstream's controller does.
"""

from __future__ import annotations

from shared.api import constants as c
from shared.api import dns
from shared.api import field_errors as fe
from shared.api.field_errors import FieldError
from shared.api.rules import extended_errors, last_worker_hostname, update_errors
from shared.api.types import MPIJob, ReplicaSpec, RunPolicy

_NONNEGATIVE = "must be greater than or equal to 0"


def validate(job: MPIJob) -> list[FieldError]:
    """Every error of an MPIJob: upstream's, in upstream's order, then the extended rules."""
    return validate_upstream(job) + extended_errors(job)


def validate_update(old: MPIJob, new: MPIJob) -> list[FieldError]:
    """Errors of an UPDATE: the update rules (immutability) followed by the new object's errors."""
    return update_errors(old, new) + validate(new)


def validate_upstream(job: MPIJob) -> list[FieldError]:
    """Exactly upstream's ``ValidateMPIJob``: same rules, paths, messages and order."""
    spec = job.spec
    errors = _name_errors(job)
    replica_specs = spec.mpi_replica_specs if spec else None
    errors += _replica_specs_errors(replica_specs)
    slots = spec.slots_per_worker if spec else None
    if slots is None:
        errors.append(fe.required("spec.slotsPerWorker", "must have number of slots per worker"))
    elif slots < 0:
        errors.append(fe.invalid("spec.slotsPerWorker", slots, _NONNEGATIVE, "minimum"))
    errors += _run_policy_errors(spec.run_policy if spec and spec.run_policy else RunPolicy())
    if not (spec and spec.ssh_auth_mount_path):
        errors.append(fe.required("spec.sshAuthMountPath", "must have a mount path for SSH credentials"))
    implementation = (spec.mpi_implementation if spec else None) or ""
    if implementation not in c.MPI_IMPLEMENTATIONS:
        errors.append(fe.not_supported("spec.mpiImplementation", implementation, sorted(c.MPI_IMPLEMENTATIONS)))
    return errors


def _name_errors(job: MPIJob) -> list[FieldError]:
    host = last_worker_hostname(job)
    problems = dns.is_dns1035_label(host)
    if not problems:
        return []
    detail = f'will not able to create pod and service with invalid DNS label "{host}": ' + ", ".join(problems)
    return [fe.invalid("metadata.name", job.name, detail)]


def _replica_specs_errors(specs: dict[str, ReplicaSpec | None] | None) -> list[FieldError]:
    path = "spec.mpiReplicaSpecs"
    if specs is None:
        return [fe.required(path, "must have replica specs")]
    errors: list[FieldError] = []
    launcher = specs.get(c.LAUNCHER)
    launcher_path = f"{path}[{c.LAUNCHER}]"
    if launcher is None:
        errors.append(fe.required(launcher_path, "must have Launcher replica spec"))
    else:
        errors += _replica_spec_errors(launcher, launcher_path)
        if launcher.replicas is not None and launcher.replicas != 1:
            errors.append(fe.invalid(f"{launcher_path}.replicas", launcher.replicas, "must be 1"))
    worker = specs.get(c.WORKER)
    if worker is not None:
        worker_path = f"{path}[{c.WORKER}]"
        errors += _replica_spec_errors(worker, worker_path)
        if worker.replicas is not None and worker.replicas <= 0:
            detail = "must be greater than or equal to 1"
            errors.append(fe.invalid(f"{worker_path}.replicas", worker.replicas, detail))
    return errors


def _replica_spec_errors(spec: ReplicaSpec, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if spec.replicas is None:
        errors.append(fe.required(f"{path}.replicas", "must define number of replicas"))
    restart_policy = spec.restart_policy or ""
    if restart_policy not in c.VALID_RESTART_POLICIES:
        supported = sorted(c.VALID_RESTART_POLICIES)
        errors.append(fe.not_supported(f"{path}.restartPolicy", restart_policy, supported))
    if not spec.containers():
        errors.append(fe.required(f"{path}.template.spec.containers", "must define at least one container"))
    return errors


def _run_policy_errors(run_policy: RunPolicy) -> list[FieldError]:
    path = "spec.runPolicy"
    errors: list[FieldError] = []
    if run_policy.clean_pod_policy is None:
        errors.append(fe.required(f"{path}.cleanPodPolicy", "must have clean Pod policy"))
    elif run_policy.clean_pod_policy not in c.CLEAN_POD_POLICIES:
        supported = sorted(c.CLEAN_POD_POLICIES)
        errors.append(fe.not_supported(f"{path}.cleanPodPolicy", run_policy.clean_pod_policy, supported))
    for name, value in (
        ("ttlSecondsAfterFinished", run_policy.ttl_seconds_after_finished),
        ("activeDeadlineSeconds", run_policy.active_deadline_seconds),
        ("backoffLimit", run_policy.backoff_limit),
    ):
        if value is not None and value < 0:
            errors.append(fe.invalid(f"{path}.{name}", value, _NONNEGATIVE, "minimum"))
    managed_by = run_policy.managed_by
    if managed_by is not None and managed_by not in c.MANAGED_BY_VALUES:
        errors.append(fe.not_supported(f"{path}.managedBy", managed_by, sorted(c.MANAGED_BY_VALUES)))
    return errors
