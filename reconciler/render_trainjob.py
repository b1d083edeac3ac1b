"""``python -m reconciler render --as trainjob``: an Open MPI MPIJob as a Kubeflow Trainer v2 TrainJob
(trainer.kubeflow.org/v1alpha1) and the ClusterTrainingRuntime ``mpijob-<namespace>-<job>`` it references.

The runtime has Trainer v2.3's MPI shape: ``mlPolicy.mpi`` (``numProcPerNode`` = slotsPerWorker, ``sshAuthMountPath``,
``runLauncherAsNode`` = runLauncherAsWorker) and a JobSet template with the replicatedJobs ``node`` (the workers)
then ``launcher`` (``dependsOn`` node Ready, labelled ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``).
Trainer itself creates the SSH Secret ``<job>-mpi-ssh-auth`` and the hostfile ConfigMap ``<job>-mpi-hostfile``, and
mounts them, with its ``OMPI_MCA_*`` variables, only into containers named ``node``: the first container of each
template is renamed so. The launcher keeps this operator's other variables (``PRTE_MCA_*`` for Open MPI 5, which
Trainer v2.3 does not set: trainer#4028). Trainer runs Open MPI only: Intel MPI and MPICH jobs are refused, with
the reason. Pure.
"""

from __future__ import annotations

from typing import Any

from reconciler.mpijob.builders.job_facts import (
    is_suspended,
    mpi_implementation,
    replica_restart_policy,
    run_policy_of,
    runs_launcher_as_worker,
    slots_per_worker,
    ssh_auth_mount_path,
    worker_replicas,
)
from reconciler.mpijob.builders.launcher import launcher_env
from reconciler.mpijob.builders.pod_template import append_items, copy_template, first_container
from reconciler.render import RenderError, admitted
from reconciler.render_jobset import (
    Exported,
    failure_policy,
    jobset_metadata,
    launcher_job_spec,
    name_errors,
    not_expressed,
    replicated_jobs,
)
from shared.api import constants as c
from shared.api.types import MPIJob
from shared.jsondict import JSONDict

TRAINER_API_GROUP = "trainer.kubeflow.org"
TRAINER_API_VERSION = f"{TRAINER_API_GROUP}/v1alpha1"
RUNTIME_KIND = "ClusterTrainingRuntime"
NODE, LAUNCHER = "node", "launcher"
ANCESTOR_STEP_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
# what Trainer's MPI plugin sets on the launcher's node container (and refuses from the user)
TRAINER_ENV = frozenset({"OMPI_MCA_orte_default_hostfile", "OMPI_MCA_orte_keep_fqdn_hostnames",
                         "OMPI_MCA_orte_set_default_slots", "OMPI_MCA_plm_rsh_args"})


def runtime_name(job: MPIJob) -> str:
    """Cluster-scoped, so the namespace is part of it."""
    return f"mpijob-{job.namespace}-{job.name}"


def node_template(job: MPIJob, replica_type: str, env: list[JSONDict]) -> JSONDict:
    """The replica's pod template, its first container renamed ``node`` and given ``env``; the default sshd
    command for a worker without one."""
    template = copy_template(job, replica_type)
    spec = template["spec"]
    container = first_container(spec)
    container["name"] = NODE
    if replica_type == c.WORKER and not container.get("command") and not container.get("args"):
        container["command"] = list(c.DEFAULT_WORKER_COMMAND)
    append_items(container, "env", env)
    spec["restartPolicy"] = replica_restart_policy(job, replica_type)
    if not template["metadata"]:
        del template["metadata"]
    return template


def build_runtime(job: MPIJob, document: JSONDict) -> JSONDict:
    """The ClusterTrainingRuntime: the job's launcher and worker templates in Trainer's MPI shape."""
    user_env = (first_container(copy_template(job, c.LAUNCHER)["spec"])).get("env")
    env = [item for item in launcher_env(job, user_env) if item["name"] not in TRAINER_ENV]
    launcher = launcher_job_spec(job, node_template(job, c.LAUNCHER, env))
    del launcher["parallelism"], launcher["completions"], launcher["completionMode"]  # Trainer sets them
    worker = None
    if worker_replicas(job) > 0:
        worker = {"template": node_template(job, c.WORKER, [{"name": c.ENV_JOB_ROLE, "value": c.ROLE_WORKER}])}
    rjobs = replicated_jobs(job, launcher, worker, (LAUNCHER, NODE))
    for rjob in rjobs:
        del rjob["replicas"]  # Trainer forces 1
    rjobs[-1]["template"] = {"metadata": {"labels": {ANCESTOR_STEP_LABEL: "trainer"}}, **rjobs[-1]["template"]}
    template: JSONDict = {"network": {"publishNotReadyAddresses": True},
                          "successPolicy": {"operator": "All", "targetReplicatedJobs": [LAUNCHER]},
                          "replicatedJobs": rjobs}
    policy = failure_policy(document)
    if policy is not None:
        template["failurePolicy"] = {"maxRestarts": policy.max_restarts or 0}
    ttl = run_policy_of(job).ttl_seconds_after_finished
    if ttl is not None:
        template["ttlSecondsAfterFinished"] = ttl
    mpi = {"numProcPerNode": slots_per_worker(job), "mpiImplementation": c.OPENMPI,
           "sshAuthMountPath": ssh_auth_mount_path(job), "runLauncherAsNode": runs_launcher_as_worker(job)}
    return {"apiVersion": TRAINER_API_VERSION, "kind": RUNTIME_KIND, "metadata": {"name": runtime_name(job)},
            "spec": {"mlPolicy": {"numNodes": num_nodes(job), "mpi": mpi}, "template": {"spec": template}}}


def num_nodes(job: MPIJob) -> int:
    """The MPI hosts: the workers, and the launcher with runLauncherAsWorker (Trainer's runLauncherAsNode)."""
    return worker_replicas(job) + (1 if runs_launcher_as_worker(job) else 0)


def build_trainjob(job: MPIJob, document: JSONDict) -> JSONDict:
    """The TrainJob ``<job>``: the runtime, the node count and slots; suspended and managedBy as the MPIJob."""
    spec: JSONDict = {
        "runtimeRef": {"name": runtime_name(job), "apiGroup": TRAINER_API_GROUP, "kind": RUNTIME_KIND},
        "trainer": {"numNodes": num_nodes(job), "numProcPerNode": slots_per_worker(job)},
    }
    if is_suspended(job):
        spec["suspend"] = True
    if run_policy_of(job).managed_by == c.MANAGED_BY_MULTIKUEUE:
        spec["managedBy"] = c.MANAGED_BY_MULTIKUEUE
    return {"apiVersion": TRAINER_API_VERSION, "kind": "TrainJob", "metadata": jobset_metadata(job, document),
            "spec": spec}


def refusal(job: MPIJob) -> str | None:
    """Why Trainer v2.3 cannot run this job, None when it can."""
    implementation = mpi_implementation(job)
    if implementation != c.OPENMPI:
        return (f"Kubeflow Trainer v2.3 runs Open MPI only (mpiImplementation: {implementation}; kubeflow/trainer#1807)"
                "; --as jobset keeps it")
    if worker_replicas(job) == 0:
        return ("Trainer always starts at least one node beside the launcher (runLauncherAsWorker with no workers)"
                "; --as jobset keeps it")
    errors = name_errors(job, {LAUNCHER: 1, NODE: worker_replicas(job)})
    return "; ".join(errors) or None


def export_trainjob(document: Any, *, cluster_domain: str = "") -> Exported:
    """The ClusterTrainingRuntime and TrainJob of one Open MPI MPIJob document; RenderError when the webhook would
    deny the MPIJob or Trainer cannot run it."""
    job, document, warnings = admitted(document, cluster_domain=cluster_domain)
    reason = refusal(job)
    if reason is not None:
        raise RenderError(f'cannot render MPIJob "{job.name}" as a TrainJob: {reason}', warnings)
    notes = not_expressed(job, failure_policy(document), "Trainer")
    notes.append("discover_hosts.sh: Trainer writes a hostfile only (Elastic Horovod's host discovery is gone)")
    return Exported([build_runtime(job, document), build_trainjob(job, document)], notes, warnings)
