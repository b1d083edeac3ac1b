"""The launcher ``batch/v1`` Job ``<job>-launcher`` that runs mpirun (controller.md 2.5, 1.2 step 13)."""

from __future__ import annotations

from reconciler.mpijob.builders.child_object import app_labels, controller_ref, object_meta
from reconciler.mpijob.builders.job_facts import (
    is_suspended,
    mpi_implementation,
    replica_restart_policy,
    run_policy_of,
    runs_launcher_as_worker,
    slots_per_worker,
)
from reconciler.mpijob.builders.pod_template import (
    append_items,
    copy_template,
    env_names,
    first_container,
    json_copy,
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

POD_REPLACEMENT_FAILED = "Failed"
HOSTFILE_PATH = f"{c.CONFIG_MOUNT_PATH}/{c.HOSTFILE_NAME}"
SSH_CONNECTION_ATTEMPTS = "-o ConnectionAttempts=10"
# The same for PRRTE (Open MPI 5), with a tab where ssh also takes a blank between keyword and value:
# PRRTE 3.0 hands its ssh args to the daemons it starts cut at the first "=" ("-o ConnectionAttempts"),
# and those daemons start the next level of the launch tree (jobs of more than 64 workers) with them;
# it splits the value at spaces, so a tab keeps "ConnectionAttempts<TAB>10" one argument of ssh's -o.
PRRTE_SSH_CONNECTION_ATTEMPTS = "-o ConnectionAttempts\t10"
HOSTFILE_MODE = 0o444
DISCOVER_HOSTS_MODE = 0o555
SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "schedulingGates")


def _env(name: str, value: str = "") -> JSONDict:
    return {"name": name, "value": value} if value else {"name": name}  # Go omits an empty value


def _mpi_env(implementation: str, slots: str) -> list[JSONDict]:
    """What each MPI's launcher reads so that a plain ``mpirun -n N prog`` uses the hostfile and ssh settings.

    Upstream's names come first, byte-exact. Open MPI 5 replaced ORTE with PRRTE, which ignores the
    ``OMPI_MCA_orte_*`` names (ranks then all run on the launcher), so its ``PRTE_MCA_*`` names follow;
    Open MPI 4 ignores those. MPICH's Hydra reads ``HYDRA_LAUNCHER_EXTRA_ARGS``, not upstream's
    ``HYDRA_LAUNCH_EXTRA_ARGS``. docs/user-guide.md says which version reads which, as measured.
    """
    if implementation == c.OPENMPI:
        return [
            _env("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
            _env("OMPI_MCA_orte_default_hostfile", HOSTFILE_PATH),
            _env("OMPI_MCA_plm_rsh_args", SSH_CONNECTION_ATTEMPTS),
            _env("OMPI_MCA_orte_set_default_slots", slots),
            # false: PRRTE then matches the launcher's own hostfile line (runLauncherAsWorker) by its short
            # name instead of ssh'ing to itself, and still ssh's to the workers by their full names
            _env("PRTE_MCA_prte_keep_fqdn_hostnames", "false"),
            _env("PRTE_MCA_prte_default_hostfile", HOSTFILE_PATH),
            _env("PRTE_MCA_plm_ssh_args", PRRTE_SSH_CONNECTION_ATTEMPTS),
            _env("PRTE_MCA_prte_set_default_slots", slots),
        ]
    if implementation == c.INTEL:
        return [
            _env("I_MPI_HYDRA_HOST_FILE", HOSTFILE_PATH),
            _env("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", SSH_CONNECTION_ATTEMPTS),
            _env("I_MPI_PERHOST", slots),
        ]
    if implementation == c.MPICH:
        return [
            _env("HYDRA_HOST_FILE", HOSTFILE_PATH),
            _env("HYDRA_LAUNCH_EXTRA_ARGS", SSH_CONNECTION_ATTEMPTS),
            _env("HYDRA_LAUNCHER_EXTRA_ARGS", SSH_CONNECTION_ATTEMPTS),
        ]
    return []


# The names the launcher gets beyond upstream's. A value the user set for one of them in the first container's env
# wins: it is not appended. Upstream's own names are appended after the user's env, byte for byte, as upstream
# does (the kubelet then uses the last definition: upstream's precedence).
BEYOND_UPSTREAM = frozenset({
    "PRTE_MCA_prte_keep_fqdn_hostnames", "PRTE_MCA_prte_default_hostfile", "PRTE_MCA_plm_ssh_args",
    "PRTE_MCA_prte_set_default_slots", "HYDRA_LAUNCHER_EXTRA_ARGS",
})


def launcher_env(job: MPIJob, user_env: object = None) -> list[JSONDict]:
    """The env appended to the launcher's first container (whose env is ``user_env``): role, MPI implementation
    settings, GPU blanking; without a name beyond upstream's (``BEYOND_UPSTREAM``) that the user set."""
    env = [_env(c.ENV_JOB_ROLE, c.ROLE_LAUNCHER), *_mpi_env(mpi_implementation(job), str(slots_per_worker(job)))]
    if not runs_launcher_as_worker(job):  # keep the launcher off the node's GPUs
        env += [_env(c.ENV_NVIDIA_VISIBLE_DEVICES), _env(c.ENV_NVIDIA_DRIVER_CAPABILITIES)]
    user_set = env_names(user_env)
    return [item for item in env if not (item["name"] in BEYOND_UPSTREAM and item["name"] in user_set)]


def config_volume(job: MPIJob) -> JSONDict:
    """The ``mpi-job-config`` ConfigMap volume: hostfile 0444, discover_hosts.sh 0555."""
    items = [
        {"key": c.HOSTFILE_NAME, "path": c.HOSTFILE_NAME, "mode": HOSTFILE_MODE},
        {"key": c.DISCOVER_HOSTS_SCRIPT_NAME, "path": c.DISCOVER_HOSTS_SCRIPT_NAME, "mode": DISCOVER_HOSTS_MODE},
    ]
    return {"name": c.CONFIG_VOLUME_NAME, "configMap": {"name": names.config_map_name(job.name), "items": items}}


def template_overrides_restart_policy(job: MPIJob) -> bool:
    """Whether the Launcher template sets its own restartPolicy, which the replica's overrides.

    The caller then emits Warning ``SetPodTemplateRestartPolicy`` each time it builds the launcher template
    (creation and un-suspend), as upstream does.
    """
    spec = job.replica_spec(c.LAUNCHER)
    pod_spec = (spec.template or {}).get("spec") if spec is not None else None
    return isinstance(pod_spec, dict) and bool(pod_spec.get("restartPolicy"))


def build_launcher_pod_template(job: MPIJob, gang: GangScheduling | None = None) -> JSONDict:
    """The launcher Job's pod template, as upstream's ``newLauncherPodTemplate`` (metadata with ownerRef)."""
    template = copy_template(job, c.LAUNCHER)
    set_pod_labels(template, names.role_selector(job.name, c.ROLE_LAUNCHER))
    if gang is not None:
        decorate_pod_template(template, job.name, gang)
    if runs_launcher_as_worker(job):
        set_pod_labels(template, {c.LABEL_REPLICA_INDEX: "0"})
    spec = template["spec"]
    set_host_identity(spec, names.launcher_name(job.name), job.name)
    container = first_container(spec)
    append_items(container, "env", launcher_env(job, container.get("env")))
    setup_ssh(spec, job)
    spec["restartPolicy"] = replica_restart_policy(job, c.LAUNCHER)
    append_items(spec, "volumes", [config_volume(job)])
    append_items(container, "volumeMounts", [{"name": c.CONFIG_VOLUME_NAME, "mountPath": c.CONFIG_MOUNT_PATH}])
    meta = {**pod_template_meta(template), "ownerReferences": [controller_ref(job)]}
    return {"metadata": meta, "spec": spec}


def build_launcher_job(job: MPIJob, gang: GangScheduling | None = None) -> JSONDict:
    """Job ``<job>-launcher``: run-policy limits only when set, ``podReplacementPolicy: Failed``,
    ``suspend: true`` only when the MPIJob is suspended (otherwise left out).
    """
    run_policy = run_policy_of(job)
    spec: JSONDict = {}
    optional = (
        ("activeDeadlineSeconds", run_policy.active_deadline_seconds),
        ("backoffLimit", run_policy.backoff_limit),
        ("ttlSecondsAfterFinished", run_policy.ttl_seconds_after_finished),
    )
    spec.update((key, value) for key, value in optional if value is not None)
    spec["template"] = build_launcher_pod_template(job, gang)
    if is_suspended(job):
        spec["suspend"] = True
    spec["podReplacementPolicy"] = POD_REPLACEMENT_FAILED
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_meta(job, names.launcher_name(job.name), app_labels(job)),
        "spec": spec,
    }


def sync_scheduling_directives(existing_job: JSONDict, desired_template: JSONDict) -> JSONDict:
    """A copy of an existing (suspended) launcher Job, ready to Update on resume (1.2 step 13.3-13.4).

    Template labels and annotations: existing merged with desired (desired wins, extra keys kept);
    ``nodeSelector``, ``tolerations``, ``schedulingGates``: replaced by the desired ones (removed if
    unset there); ``spec.suspend: false``. Neither argument is changed; clearing ``status.startTime``
    first is the caller's.
    """
    updated: JSONDict = json_copy(existing_job)
    job_spec = updated["spec"] = updated.get("spec") or {}
    template = job_spec["template"] = job_spec.get("template") or {}
    meta = template["metadata"] = template.get("metadata") or {}
    pod_spec = template["spec"] = template.get("spec") or {}
    desired_meta = desired_template.get("metadata") or {}
    desired_spec = desired_template.get("spec") or {}
    for key in ("labels", "annotations"):
        merged = {**(meta.get(key) or {}), **(desired_meta.get(key) or {})}
        _set_or_drop(meta, key, merged)
    for key in SCHEDULING_DIRECTIVES:
        _set_or_drop(pod_spec, key, json_copy(desired_spec.get(key)))
    job_spec["suspend"] = False
    return updated


def _set_or_drop(target: JSONDict, key: str, value: object) -> None:
    """Set ``target[key]``, or remove it for an empty value (Go's omitempty)."""
    if value:
        target[key] = value
    else:
        target.pop(key, None)
