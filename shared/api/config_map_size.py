"""The size of a job's ConfigMap ``<job>-config`` (hostfile and ``discover_hosts.sh``), computed without building it.

The API server refuses a ConfigMap whose data (the lengths of all keys and values together) passes 1 MiB. The
hostfile holds one line per host; ``discover_hosts.sh`` one ``echo`` line per Running worker. So the largest the
ConfigMap gets is with every worker Running, and that size depends only on the names, the worker count, the
slots, the MPI implementation, ``runLauncherAsWorker`` and the cluster domain. The webhook refuses a job that
cannot fit (and warns past half the limit); the reconciler refuses it again at sync time, where its
``--cluster-domain`` is the final word.
"""

from __future__ import annotations

from shared.api import constants as c
from shared.api import field_errors as fe
from shared.api import names
from shared.api.types import MPIJob, MPIJobSpec

CONFIG_MAP_MAX_BYTES = 1024 * 1024
"""What the API server lets a ConfigMap hold: the lengths of all its data keys and values together."""
CONFIG_MAP_WARN_BYTES = CONFIG_MAP_MAX_BYTES // 2
"""Past this size admission warns: the job fits, but not with twice the workers or much longer names."""
DISCOVER_HOSTS_SHEBANG = "#!/bin/sh\n"
WORKERS_FIELD = f"spec.mpiReplicaSpecs[{c.WORKER}].replicas"


def _digits_total(count: int) -> int:
    """The number of decimal digits in 0, 1, ..., count-1 together."""
    total, width, low = 0, 1, 0
    while low < count:
        high = min(count, 10**width)
        total += (high - low) * width
        low, width = high, width + 1
    return total


def worker_count(job: MPIJob) -> int:
    """The Worker replicas, 0 without a Worker spec or count (as the reconciler reads it)."""
    worker = job.replica_spec(c.WORKER)
    return worker.replicas if worker is not None and worker.replicas is not None else 0


def config_map_size(job: MPIJob, cluster_domain: str = "", workers: int | None = None) -> int:
    """The bytes the API server counts in the job's ConfigMap data once every worker is Running (then
    ``discover_hosts.sh`` lists them all): exactly the length of what the reconciler builds. ``workers``
    replaces the job's worker count (to ask how many would fit)."""
    spec = job.spec or MPIJobSpec()
    replicas = worker_count(job) if workers is None else workers
    fqdn_suffix = len(names.host_fqdn("", job.name, job.namespace, cluster_domain))
    names_total = replicas * (len(names.worker_name(job.name, 0)) - 1 + fqdn_suffix) + _digits_total(replicas)
    hosts = replicas
    if spec.run_launcher_as_worker is True:
        hosts += 1
        names_total += len(names.launcher_name(job.name)) + fqdn_suffix
    slots = c.DEFAULT_SLOTS_PER_WORKER if spec.slots_per_worker is None else spec.slots_per_worker
    openmpi = (spec.mpi_implementation or c.OPENMPI) == c.OPENMPI
    line_end = len(f" slots={slots}\n") if openmpi else len(f":{slots}\n")  # Intel MPI and MPICH: host:slots
    hostfile = names_total + hosts * line_end
    discover = len(DISCOVER_HOSTS_SHEBANG) + names_total + hosts * len("echo \n")
    return len(c.HOSTFILE_NAME) + hostfile + len(c.DISCOVER_HOSTS_SCRIPT_NAME) + discover


def largest_fitting_workers(job: MPIJob, cluster_domain: str = "") -> int:
    """The most workers whose ConfigMap fits in 1 MiB with this job's names and settings (0 if none do).
    The size grows with every worker, so a binary search over the exact size finds it."""
    low, high = 0, CONFIG_MAP_MAX_BYTES  # every worker adds more than one byte: more than this never fits
    if config_map_size(job, cluster_domain, 0) > CONFIG_MAP_MAX_BYTES:
        return 0
    while low < high:  # invariant: low fits, everything above high does not
        middle = (low + high + 1) // 2
        if config_map_size(job, cluster_domain, middle) <= CONFIG_MAP_MAX_BYTES:
            low = middle
        else:
            high = middle - 1
    return low


def config_map_size_errors(job: MPIJob, cluster_domain: str = "") -> list[fe.FieldError]:
    """One error when the job's ConfigMap would not fit in a ConfigMap: too many workers, or too long names.
    The message gives the size, the limit and the largest worker count that fits with these names."""
    size = config_map_size(job, cluster_domain)
    if size <= CONFIG_MAP_MAX_BYTES:
        return []
    name = names.config_map_name(job.name)
    detail = (f"the hostfile and discover_hosts.sh of ConfigMap \"{name}\" would need {size} bytes, "
              f"more than the {CONFIG_MAP_MAX_BYTES} bytes a ConfigMap can hold; "
              f"at most {largest_fitting_workers(job, cluster_domain)} workers fit with these names")
    if job.replica_spec(c.WORKER) is None:
        return [fe.invalid("metadata.name", job.name, detail)]
    return [fe.invalid(WORKERS_FIELD, worker_count(job), detail)]


def config_map_size_warnings(job: MPIJob, cluster_domain: str = "") -> list[str]:
    """A warning when the job's ConfigMap fits but passes half the limit (none when it does not fit: refused)."""
    size = config_map_size(job, cluster_domain)
    if size <= CONFIG_MAP_WARN_BYTES or size > CONFIG_MAP_MAX_BYTES:
        return []
    return [f"{WORKERS_FIELD}: ConfigMap \"{names.config_map_name(job.name)}\" will hold {size} bytes with every "
            f"worker running, over half the {CONFIG_MAP_MAX_BYTES} a ConfigMap can hold; "
            f"at most {largest_fitting_workers(job, cluster_domain)} workers fit with these names"]
