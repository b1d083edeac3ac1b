"""The ConfigMap ``<job>-config``: the MPI hostfile and Elastic Horovod's ``discover_hosts.sh`` (controller.md 2.2)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reconciler.mpijob.builders.child_object import app_labels, object_meta
from reconciler.mpijob.builders.job_facts import (
    mpi_implementation,
    runs_launcher_as_worker,
    slots_per_worker,
    worker_replicas,
)
from shared.api import constants as c
from shared.api import names
from shared.api.config_map_size import DISCOVER_HOSTS_SHEBANG
from shared.api.types import MPIJob
from shared.jsondict import JSONDict

RunningWorker = str | Mapping[str, Any]
"""A Running worker pod, by name (in the job's namespace) or as a pod object (``metadata.name``/``namespace``)."""



def build_hostfile(job: MPIJob, cluster_domain: str = "") -> str:
    """One line per desired host: the launcher first with runLauncherAsWorker, then workers 0..replicas-1."""
    return _hostfile(job.name, job.namespace, worker_replicas(job), runs_launcher_as_worker(job),
                     slots_per_worker(job), mpi_implementation(job) == c.OPENMPI, cluster_domain)


@functools.lru_cache(maxsize=4)  # a job syncs many times while its pods start: built once, not 1,000 lines a sync
def _hostfile(  # noqa: PLR0913, PLR0917  the arguments are the cache's key: the scalars of the job it reads
        name: str, namespace: str, replicas: int, launcher_as_worker: bool, slots: int, openmpi: bool,
        cluster_domain: str) -> str:
    hosts = [names.worker_name(name, i) for i in range(replicas)]
    if launcher_as_worker:
        hosts.insert(0, names.launcher_name(name))
    line_end = f" slots={slots}\n" if openmpi else f":{slots}\n"  # Intel MPI and MPICH: host:slots
    return "".join(names.host_fqdn(host, name, namespace, cluster_domain) + line_end for host in hosts)


def _name_and_namespace(job: MPIJob, worker: RunningWorker) -> tuple[str, str]:
    if isinstance(worker, str):
        return worker, job.namespace
    meta = worker.get("metadata") or {}
    return str(meta.get("name", "")), str(meta.get("namespace") or job.namespace)


def _index_order(job_name: str) -> Callable[[tuple[str, str]], tuple[float, str, str]]:
    """A sort key: workers ``<job>-worker-<i>`` by their index ``i`` as a number, any other name after them."""
    prefix = names.worker_name(job_name, 0)[:-1]

    def key(host: tuple[str, str]) -> tuple[float, str, str]:
        suffix = host[0][len(prefix):] if host[0].startswith(prefix) else ""
        return (int(suffix) if suffix.isdigit() else math.inf, *host)

    return key


def build_discover_hosts(job: MPIJob, running_workers: Iterable[RunningWorker], cluster_domain: str = "") -> str:
    """The host discovery script: the launcher (with runLauncherAsWorker) then the given Running workers in
    index order, as the hostfile lists them (``-worker-2`` before ``-worker-10``; upstream sorts the names as
    strings, which differs from 11 workers on: docs/kueue.md says why we don't). The caller filters on Running.
    """
    lines = [DISCOVER_HOSTS_SHEBANG]
    if runs_launcher_as_worker(job):
        launcher = names.host_fqdn(names.launcher_name(job.name), job.name, job.namespace, cluster_domain)
        lines.append(f"echo {launcher}\n")
    hosts = sorted((_name_and_namespace(job, worker) for worker in running_workers), key=_index_order(job.name))
    for name, namespace in hosts:
        lines.append(f"echo {names.host_fqdn(name, job.name, namespace, cluster_domain)}\n")
    return "".join(lines)


def build_config_map_data(job: MPIJob, cluster_domain: str, running_workers: Iterable[RunningWorker]) -> dict[str, str]:
    """Exactly the two keys ``hostfile`` and ``discover_hosts.sh``: compare with an existing ConfigMap's data."""
    return {
        c.HOSTFILE_NAME: build_hostfile(job, cluster_domain),
        c.DISCOVER_HOSTS_SCRIPT_NAME: build_discover_hosts(job, running_workers, cluster_domain),
    }


def build_config_map(job: MPIJob, cluster_domain: str = "", running_workers: Iterable[RunningWorker] = ()) -> JSONDict:
    """ConfigMap ``<job>-config`` with labels ``{app: <job>}``, controlled by the job."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(job, names.config_map_name(job.name), app_labels(job)),
        "data": build_config_map_data(job, cluster_domain, running_workers),
    }

