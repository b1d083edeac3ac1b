"""Worker Pods ``<job>-worker-<i>``: sshd servers the launcher reaches over SSH (controller.md 2.4)."""

from __future__ import annotations

from reconciler.mpijob.builders.child_object import controller_ref
from reconciler.mpijob.builders.job_facts import replica_restart_policy, runs_launcher_as_worker
from reconciler.mpijob.builders.pod_template import (
    append_items,
    copy_template,
    first_container,
    pod_template_meta,
    set_host_identity,
    set_pod_labels,
    setup_ssh,
)
from reconciler.mpijob.builders.podgroup import GangScheduling, decorate_pod_template
from shared.api import constants as c
from shared.api import names
from shared.api.types import MPIJob
from shared.jsondict import JSONDict

DEFAULT_SEARCH_DOMAIN = "cluster.local"


def worker_dns_search(job: MPIJob, cluster_domain: str = "") -> str:
    """``<job>.<ns>.svc.<domain>``, the search path through which Intel MPI's and MPICH's workers resolve the
    launcher by its short hostname: ``--cluster-domain`` when set (upstream's fix after v0.8.2,
    kubeflow/mpi-operator#832), else ``cluster.local`` as v0.8.2 hard-codes it (the hostfile then holds
    ``...svc`` names and says nothing of the domain)."""
    return f"{names.service_name(job.name)}.{job.namespace}.svc.{cluster_domain or DEFAULT_SEARCH_DOMAIN}"


def worker_replica_index(job: MPIJob, index: int) -> str:
    """The replica-index label: ``i``, or ``i+1`` when the launcher takes index 0 as a worker."""
    return str(index + 1 if runs_launcher_as_worker(job) else index)


def set_up_worker_spec(spec: JSONDict, job: MPIJob, cluster_domain: str) -> None:
    """What every worker's pod spec gets after its host identity (a private copy, changed in place): the DNS
    search path, the replica's restartPolicy, sshd as the default command, the role variable and the SSH volume."""
    spec["dnsConfig"] = spec.get("dnsConfig") or {}
    append_items(spec["dnsConfig"], "searches", [worker_dns_search(job, cluster_domain)])
    spec["restartPolicy"] = replica_restart_policy(job, c.WORKER)
    container = first_container(spec)
    if not container.get("command") and not container.get("args"):
        container["command"] = list(c.DEFAULT_WORKER_COMMAND)
    append_items(container, "env", [{"name": c.ENV_JOB_ROLE, "value": c.ROLE_WORKER}])
    setup_ssh(spec, job)


def build_worker(job: MPIJob, index: int, gang: GangScheduling | None = None, *,
                 cluster_domain: str = "") -> JSONDict:
    """Pod ``<job>-worker-<index>`` from a copy of the Worker template, as upstream's ``newWorker``; its DNS
    search path ends in ``cluster_domain`` (``--cluster-domain``), ``cluster.local`` when that is empty."""
    name = names.worker_name(job.name, index)
    template = copy_template(job, c.WORKER)
    set_pod_labels(template, {
        **names.role_selector(job.name, c.ROLE_WORKER),
        c.LABEL_REPLICA_INDEX: worker_replica_index(job, index),
    })
    spec = template["spec"]
    set_host_identity(spec, name, job.name)
    set_up_worker_spec(spec, job, cluster_domain)
    if gang is not None:
        decorate_pod_template(template, job.name, gang)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": job.namespace,
            **pod_template_meta(template),
            "ownerReferences": [controller_ref(job)],
        },
        "spec": spec,
    }
