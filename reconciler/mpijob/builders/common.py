"""Pieces shared by the child-object builders: owner references, metadata, job accessors, pod-spec edits.

The ``append_*``/``set_*`` helpers mutate the pod template or container they are given: builders call
them only on their own private copies (``copy_template``), never on anything reachable from the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from shared.api import constants as c
from shared.api import names
from shared.api.types import MPIJob, MPIJobSpec, ReplicaSpec, RunPolicy
from shared.jsondict import JSONDict

DNS_CLUSTER_FIRST_WITH_HOST_NET = "ClusterFirstWithHostNet"
SSH_ROOT_DEFAULT_MODE = 0o600
HOSTFILE_MODE = 0o444
DISCOVER_HOSTS_MODE = 0o555


def json_copy(value: Any) -> Any:
    """A deep copy of JSON data (several times faster than ``copy.deepcopy`` on pod templates)."""
    return orjson.loads(orjson.dumps(value))


def replacing_merge_patch(have: Mapping[str, Any] | None, want: Mapping[str, Any]) -> JSONDict:
    """The JSON merge patch (RFC 7386) value that turns the map ``have`` into exactly ``want``.

    A merge patch merges maps key by key, so keys ``have`` has and ``want`` lacks are set to null (removed).
    """
    return {**dict.fromkeys((key for key in have or {} if key not in want), None), **want}


def controller_ref(job: MPIJob) -> JSONDict:
    """The controller ownerReference every child carries (Go's ``metav1.NewControllerRef``)."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "name": job.name,
        "uid": job.metadata.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def app_labels(job: MPIJob) -> dict[str, str]:
    """``{app: <job>}``: the labels of the Service, ConfigMap, Secret and launcher Job."""
    return {"app": job.name}


def object_meta(job: MPIJob, name: str, labels: dict[str, str] | None = None) -> JSONDict:
    """Metadata of a child object in the job's namespace, controlled by the job."""
    meta: JSONDict = {"name": name, "namespace": job.namespace}
    if labels:
        meta["labels"] = labels
    meta["ownerReferences"] = [controller_ref(job)]
    return meta


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


def copy_template(job: MPIJob, replica_type: str) -> JSONDict:
    """A private deep copy of a replica's pod template, with ``metadata`` and ``spec`` as dicts.

    Raises ``ValueError`` when the template has no container: validation rejects such jobs first.
    """
    spec = job.replica_spec(replica_type)
    template = json_copy(spec.template) if spec is not None and isinstance(spec.template, dict) else {}
    template["metadata"] = template.get("metadata") or {}
    template["spec"] = template.get("spec") or {}
    containers = template["spec"].get("containers")
    if not isinstance(containers, list) or not containers or not isinstance(containers[0], dict):
        raise ValueError(f"MPIJob {job.namespace}/{job.name}: the {replica_type} template has no container")
    return template


def first_container(pod_spec: JSONDict) -> JSONDict:
    """The first container: the one upstream adds env, mounts and the default command to."""
    container: JSONDict = pod_spec["containers"][0]
    return container


def append_items(target: JSONDict, key: str, items: list[Any]) -> None:
    """Append to the list at ``target[key]`` (created when absent or null)."""
    target[key] = [*(target.get(key) or []), *items]


def set_pod_labels(template: JSONDict, labels: dict[str, str]) -> None:
    """Overlay ``labels`` on the template's labels (the given ones win on conflict)."""
    meta = template["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), **labels}


def set_host_identity(pod_spec: JSONDict, hostname: str, job_name: str) -> None:
    """Stable DNS identity through the headless Service; host-network pods keep cluster DNS."""
    pod_spec["hostname"] = hostname
    pod_spec["subdomain"] = names.service_name(job_name)
    if pod_spec.get("hostNetwork") is True:
        pod_spec["dnsPolicy"] = DNS_CLUSTER_FIRST_WITH_HOST_NET


def ssh_volume(job: MPIJob) -> JSONDict:
    """The ``ssh-auth`` Secret volume; ``defaultMode`` 0600 only for the root mount path (else API default)."""
    items = [
        {"key": c.SSH_PRIVATE_KEY, "path": c.SSH_PRIVATE_KEY_FILE},
        {"key": c.SSH_PUBLIC_KEY, "path": c.SSH_PUBLIC_KEY_FILE},
        {"key": c.SSH_PUBLIC_KEY, "path": c.SSH_AUTHORIZED_KEYS_FILE},
    ]
    secret: JSONDict = {"secretName": names.ssh_secret_name(job.name), "items": items}
    if ssh_auth_mount_path(job) == c.ROOT_SSH_PATH:
        secret["defaultMode"] = SSH_ROOT_DEFAULT_MODE
    return {"name": c.SSH_AUTH_VOLUME, "secret": secret}


def setup_ssh(pod_spec: JSONDict, job: MPIJob) -> None:
    """Add the ``ssh-auth`` volume and mount it into the first container only."""
    append_items(pod_spec, "volumes", [ssh_volume(job)])
    mount = {"name": c.SSH_AUTH_VOLUME, "mountPath": ssh_auth_mount_path(job)}
    append_items(first_container(pod_spec), "volumeMounts", [mount])


def pod_template_meta(template: JSONDict) -> JSONDict:
    """Labels and (non-empty) annotations of a decorated template, as fresh dicts."""
    meta = template["metadata"]
    out: JSONDict = {"labels": dict(meta.get("labels") or {})}
    if meta.get("annotations"):
        out["annotations"] = dict(meta["annotations"])
    return out
