"""The pod templates of the launcher and the workers: a private copy of the job's, and the edits both make.

The ``append_*``/``set_*`` helpers mutate the pod template or container they are given: builders call
them only on their own private copies (``copy_template``), never on anything reachable from the job.
"""

from __future__ import annotations

from typing import Any

import orjson

from reconciler.mpijob.builders.job_facts import ssh_auth_mount_path
from shared.api import constants as c
from shared.api import names
from shared.api.types import MPIJob
from shared.jsondict import JSONDict

DNS_CLUSTER_FIRST_WITH_HOST_NET = "ClusterFirstWithHostNet"
SSH_ROOT_DEFAULT_MODE = 0o600


def json_copy(value: Any) -> Any:
    """A deep copy of JSON data (several times faster than ``copy.deepcopy`` on pod templates)."""
    return orjson.loads(orjson.dumps(value))


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


def env_names(env: object) -> set[str]:
    """The variable names a container's ``env`` list defines (entries that are not named objects ignored)."""
    if not isinstance(env, list):
        return set()
    return {item["name"] for item in env if isinstance(item, dict) and isinstance(item.get("name"), str)}


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
