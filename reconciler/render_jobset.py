"""``python -m reconciler render --as jobset``: an MPIJob as the JobSet (jobset.x-k8s.io/v1alpha2) that runs it
without this operator, with its SSH Secret and hostfile ConfigMap, and the list of what JobSet cannot express.

The JobSet ``<job>`` has two replicatedJobs, ``worker`` (one Indexed Job of ``replicas`` pods, left out when there
are no workers) and ``launcher`` (one pod, which ``dependsOn`` the workers being Ready, as Kubeflow Trainer's MPI
runtime does: JobSet forbids ``dependsOn`` on the first replicatedJob, hence the order). JobSet names a pod's host
``<jobset>-<rjob>-<jobIndex>-<podIndex>`` and gives it the subdomain ``<job>`` (its headless Service), so the
hostfile lists ``<job>-worker-0-<i>.<job>`` (``<job>-launcher-0-0.<job>`` first with runLauncherAsWorker), resolved
through the pod's DNS search path as Trainer's are. The pod templates are the ones the reconciler builds (the same
env, SSH and hostfile mounts, worker DNS search path), less what JobSet sets itself (hostname, subdomain) and the
operator's own labels (``operator-name``, ``replica-index``). Pure: the key pair is a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reconciler.mpijob.builders import SSHKeyPair, build_launcher_pod_template, build_ssh_secret, build_worker
from reconciler.mpijob.builders.job_facts import (
    is_suspended,
    mpi_implementation,
    run_policy_of,
    runs_launcher_as_worker,
    slots_per_worker,
    worker_replicas,
)
from reconciler.mpijob.policy_decisions import failure_policy_of
from reconciler.render import RenderError, admitted
from shared.api import constants as c
from shared.api import names
from shared.api.config_map_size import DISCOVER_HOSTS_SHEBANG
from shared.api.conversion import convert
from shared.api.types import MPIJob
from shared.api.v2types import FailurePolicy
from shared.jsondict import JSONDict

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
WORKER_RJOB, LAUNCHER_RJOB = "worker", "launcher"
MAX_NAME = 63
# the JobSet webhook adds a 5-character suffix to the longest pod name it checks (a pod's random suffix)
POD_NAME_SUFFIX = len("-abcde")
DROPPED_POD_LABELS = (c.LABEL_OPERATOR_NAME, c.LABEL_REPLICA_INDEX)
KUBECTL_PREFIX = "kubectl.kubernetes.io/"


@dataclass(frozen=True)
class Exported:
    """The objects that run an MPIJob elsewhere, what of the MPIJob they cannot express, and the webhook's
    warnings for the MPIJob."""

    objects: list[JSONDict]
    not_expressed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def host(jobset: str, rjob: str, index: int, subdomain: str) -> str:
    """A JobSet pod's DNS name through its subdomain: ``<jobset>-<rjob>-0-<index>.<subdomain>``."""
    return f"{jobset}-{rjob}-0-{index}.{subdomain}"


def hosts(job: MPIJob, launcher_rjob: str = LAUNCHER_RJOB, worker_rjob: str = WORKER_RJOB) -> list[str]:
    """Every MPI host in rank order: the launcher first with runLauncherAsWorker, then the workers."""
    workers = [host(job.name, worker_rjob, i, job.name) for i in range(worker_replicas(job))]
    return [host(job.name, launcher_rjob, 0, job.name), *workers] if runs_launcher_as_worker(job) else workers


def build_hostfile(job: MPIJob) -> str:
    """Open MPI ``<host> slots=N``, Intel MPI and MPICH ``<host>:N``, one line per host."""
    slots = slots_per_worker(job)
    line_end = f" slots={slots}\n" if mpi_implementation(job) == c.OPENMPI else f":{slots}\n"
    return "".join(name + line_end for name in hosts(job))


def build_config_map(job: MPIJob) -> JSONDict:
    """ConfigMap ``<job>-config``: the hostfile, and a ``discover_hosts.sh`` that lists every host (nothing
    rewrites it as workers start and stop under JobSet)."""
    script = DISCOVER_HOSTS_SHEBANG + "".join(f"echo {name}\n" for name in hosts(job))
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(job, names.config_map_name(job.name)),
            "data": {c.HOSTFILE_NAME: build_hostfile(job), c.DISCOVER_HOSTS_SCRIPT_NAME: script}}


def build_secret(job: MPIJob, key_pair: SSHKeyPair) -> JSONDict:
    """Secret ``<job>-ssh`` (``kubernetes.io/ssh-auth``) holding ``key_pair``, as the reconciler creates it."""
    secret = build_ssh_secret(job, key_pair)
    return {**secret, "metadata": _meta(job, names.ssh_secret_name(job.name))}


def _meta(job: MPIJob, name: str) -> JSONDict:
    """No ownerReference (the JobSet has no uid yet): labelled with the JobSet's name, to delete them with it."""
    return {"name": name, "namespace": job.namespace, "labels": {JOBSET_NAME_LABEL: job.name}}


def jobset_pod_template(template: JSONDict) -> JSONDict:
    """A pod template the reconciler builds, less what JobSet sets (hostname, subdomain), the ownerReference and
    the operator's own labels (this operator does not watch these pods)."""
    meta = dict(template.get("metadata") or {})
    meta.pop("ownerReferences", None)
    meta.pop("name", None)
    meta.pop("namespace", None)
    meta["labels"] = {k: v for k, v in (meta.get("labels") or {}).items() if k not in DROPPED_POD_LABELS}
    spec = {k: v for k, v in template["spec"].items() if k not in ("hostname", "subdomain")}
    return {"metadata": meta, "spec": spec}


def launcher_job_spec(job: MPIJob, template: JSONDict) -> JSONDict:
    """The launcher's Job spec: one pod, the runPolicy's deadline and backoff limit as on the launcher Job."""
    run_policy = run_policy_of(job)
    spec: JSONDict = {"parallelism": 1, "completions": 1, "completionMode": "Indexed"}
    optional = (("activeDeadlineSeconds", run_policy.active_deadline_seconds),
                ("backoffLimit", run_policy.backoff_limit))
    spec.update((key, value) for key, value in optional if value is not None)
    return {**spec, "podReplacementPolicy": "Failed", "template": template}


def worker_job_spec(job: MPIJob, template: JSONDict) -> JSONDict:
    replicas = worker_replicas(job)
    return {"parallelism": replicas, "completions": replicas, "completionMode": "Indexed", "template": template}


def replicated_jobs(job: MPIJob, launcher: JSONDict, worker: JSONDict | None,
                    names_: tuple[str, str] = (LAUNCHER_RJOB, WORKER_RJOB)) -> list[JSONDict]:
    """The workers first, then the launcher depending on them being Ready (JobSet forbids ``dependsOn`` on the
    first replicatedJob); the launcher alone without workers."""
    launcher_name, worker_name = names_
    launcher_rjob: JSONDict = {"name": launcher_name, "replicas": 1}
    if worker is None:
        return [{**launcher_rjob, "template": {"spec": launcher}}]
    return [{"name": worker_name, "replicas": 1, "template": {"spec": worker}},
            {**launcher_rjob, "dependsOn": [{"name": worker_name, "status": "Ready"}], "template": {"spec": launcher}}]


def name_errors(job: MPIJob, rjob_pods: dict[str, int]) -> list[str]:
    """The JobSet webhook's refusal of names too long: the longest generated pod name, with a 5-character
    suffix, must fit a DNS label."""
    longest = max(len(f"{job.name}-{rjob}-0-{pods - 1}") + POD_NAME_SUFFIX for rjob, pods in rjob_pods.items())
    if longest <= MAX_NAME:
        return []
    return [f"the name {job.name!r} is too long: the JobSet's pod names would have {longest} characters, "
            f"more than {MAX_NAME} (shorten it by {longest - MAX_NAME})"]


def jobset_metadata(job: MPIJob, document: JSONDict) -> JSONDict:
    """The MPIJob's name, namespace, labels (a Kueue queue-name label keeps working: Kueue runs JobSets) and
    annotations, but kubectl's (``kubectl.kubernetes.io/last-applied-configuration`` of an exported MPIJob)."""
    given = document.get("metadata") or {}
    meta: JSONDict = {"name": job.name, "namespace": job.namespace}
    if given.get("labels"):
        meta["labels"] = dict(given["labels"])
    annotations = {k: v for k, v in (given.get("annotations") or {}).items() if not k.startswith(KUBECTL_PREFIX)}
    if annotations:
        meta["annotations"] = annotations
    return meta


def failure_policy(document: JSONDict) -> FailurePolicy | None:
    """The job's v2 failurePolicy (v2, or v2beta1 with the annotation), None without one."""
    stored = convert(document, c.API_VERSION) if document.get("apiVersion") in c.API_VERSIONS else document
    return failure_policy_of(stored)


def not_expressed(job: MPIJob, policy: FailurePolicy | None, under: str) -> list[str]:
    """What of this MPIJob the rendered objects do not do, one sentence each."""
    run_policy = run_policy_of(job)
    notes = []
    if run_policy.scheduling_policy is not None:
        notes.append(f"runPolicy.schedulingPolicy: {under} creates no PodGroup; gang-schedule with Kueue "
                     "(label kueue.x-k8s.io/queue-name) instead")
    if policy is not None and policy.rules:
        notes.append(f"runPolicy.failurePolicy.rules: {under} restarts the whole job after any failed Job, up to "
                     "maxRestarts, whatever the exit code or pod condition")
    if (run_policy.clean_pod_policy or c.CLEAN_POD_POLICY_NONE) == c.CLEAN_POD_POLICY_NONE:
        notes.append(f"runPolicy.cleanPodPolicy None: {under} deletes the running workers when the launcher ends")
    return notes


def export_jobset(document: Any, key_pair: SSHKeyPair, *, cluster_domain: str = "") -> Exported:
    """The Secret, ConfigMap and JobSet of one MPIJob document; RenderError when the webhook would deny the
    MPIJob or JobSet's would deny the JobSet."""
    job, document, warnings = admitted(document, cluster_domain=cluster_domain)
    workers = worker_replicas(job) if job.replica_spec(c.WORKER) is not None else 0
    errors = name_errors(job, {LAUNCHER_RJOB: 1, **({WORKER_RJOB: workers} if workers else {})})
    if errors:
        raise RenderError(f'cannot render MPIJob "{job.name}" as a JobSet: ' + "; ".join(errors), warnings)
    policy = failure_policy(document)
    notes = not_expressed(job, policy, "JobSet")
    if workers:
        notes.append("discover_hosts.sh lists every worker from the start, not only the running ones (nothing "
                     "rewrites it under JobSet)")
    objects = [build_secret(job, key_pair), build_config_map(job), build_jobset(job, document, policy, cluster_domain)]
    return Exported(objects, notes, warnings)


def build_jobset(job: MPIJob, document: JSONDict, policy: FailurePolicy | None, cluster_domain: str = "") -> JSONDict:
    """The JobSet ``<job>``: workers, then the launcher; complete when the launcher completes."""
    launcher = launcher_job_spec(job, jobset_pod_template(build_launcher_pod_template(job)))
    worker = None
    if job.replica_spec(c.WORKER) is not None and worker_replicas(job) > 0:
        pod = build_worker(job, 0, cluster_domain=cluster_domain)
        worker = worker_job_spec(job, jobset_pod_template({"metadata": pod["metadata"], "spec": pod["spec"]}))
    spec: JSONDict = {
        "network": {"enableDNSHostnames": True, "subdomain": names.service_name(job.name),
                    "publishNotReadyAddresses": True},
        "replicatedJobs": replicated_jobs(job, launcher, worker),
        "successPolicy": {"operator": "All", "targetReplicatedJobs": [LAUNCHER_RJOB]},
        "failurePolicy": {"maxRestarts": (policy.max_restarts or 0) if policy is not None else 0},
    }
    run_policy = run_policy_of(job)
    if run_policy.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = run_policy.ttl_seconds_after_finished
    if is_suspended(job):
        spec["suspend"] = True
    if run_policy.managed_by == c.MANAGED_BY_MULTIKUEUE:
        spec["managedBy"] = c.MANAGED_BY_MULTIKUEUE
    return {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "metadata": jobset_metadata(job, document),
            "spec": spec}
