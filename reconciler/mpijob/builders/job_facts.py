"""What the builders and the sync ask of a job: its settings, with upstream's defaults where unset.

The webhook persists the defaults, but jobs can exist that never passed it: every reader goes through
these instead of reading ``job.spec`` fields directly.
"""

from __future__ import annotations

from shared.api import constants as c
from shared.api.types import MPIJob, MPIJobSpec, ReplicaSpec, RunPolicy, SchedulingPolicy


def spec_of(job: MPIJob) -> MPIJobSpec:
    """The job's spec (an empty one if unset)."""
    return job.spec or MPIJobSpec()


def run_policy_of(job: MPIJob) -> RunPolicy:
    """The job's runPolicy (an empty one if unset)."""
    return spec_of(job).run_policy or RunPolicy()


def slots_per_worker(job: MPIJob) -> int:
    """``slotsPerWorker``, 1 if unset."""
    slots = spec_of(job).slots_per_worker
    return c.DEFAULT_SLOTS_PER_WORKER if slots is None else slots


def runs_launcher_as_worker(job: MPIJob) -> bool:
    """Whether the launcher also runs MPI ranks (``runLauncherAsWorker``)."""
    return spec_of(job).run_launcher_as_worker is True


def ssh_auth_mount_path(job: MPIJob) -> str:
    """``sshAuthMountPath``, ``/root/.ssh`` if unset."""
    return spec_of(job).ssh_auth_mount_path or c.DEFAULT_SSH_AUTH_MOUNT_PATH


def mpi_implementation(job: MPIJob) -> str:
    """``mpiImplementation``, OpenMPI if unset."""
    return spec_of(job).mpi_implementation or c.OPENMPI


def launcher_waits_for_workers(job: MPIJob) -> bool:
    """Whether the launcher is created only once every worker is Ready: any ``launcherCreationPolicy`` set
    other than ``AtStartup`` (unset is upstream's default, ``AtStartup``).
    """
    policy = spec_of(job).launcher_creation_policy
    return policy is not None and policy != c.LAUNCHER_AT_STARTUP


def gang_includes_launcher(job: MPIJob) -> bool:
    """Whether the launcher is one of the pods the gang waits for.

    Not when the launcher waits for the workers to be Ready (``WaitForWorkersReady``) and there are workers:
    counting it would deadlock (kubeflow/mpi-operator#608), the gang waiting for a launcher that is only
    created once the gang's workers run. The launcher is then placed on its own, after them.
    """
    return not launcher_waits_for_workers(job) or worker_replicas(job) == 0


def calculate_min_available(job: MPIJob) -> int:
    """``schedulingPolicy.minAvailable`` when set; else the pods created together: workers + 1 (upstream's
    rule, also with runLauncherAsWorker), or only the workers when the launcher waits for them.
    The one rule of every gang backend.
    """
    min_available = (run_policy_of(job).scheduling_policy or SchedulingPolicy()).min_available
    if min_available is not None:
        return min_available
    return worker_replicas(job) + (1 if gang_includes_launcher(job) else 0)


def is_suspended(job: MPIJob) -> bool:
    """Whether ``runPolicy.suspend`` is true."""
    return run_policy_of(job).suspend is True


def worker_replicas(job: MPIJob) -> int:
    """The desired worker count: 0 without a Worker spec or replica count (Go's ``workerReplicas``)."""
    worker = job.replica_spec(c.WORKER)
    return worker.replicas if worker is not None and worker.replicas is not None else 0


def replica_restart_policy(job: MPIJob, replica_type: str) -> str:
    """The pod restartPolicy of a replica type: its replica-level policy, with ``ExitCode`` as ``Never``."""
    spec = job.replica_spec(replica_type) or ReplicaSpec()
    default = c.RESTART_ON_FAILURE if replica_type == c.LAUNCHER else c.RESTART_NEVER
    policy = spec.restart_policy or default
    return c.RESTART_NEVER if policy == c.RESTART_EXIT_CODE else policy
