"""The workers' readinessProbe, which launcher gating relies on (docs/proposals/launcher-gating.md).

Under ``launcherCreationPolicy: WaitForWorkersReady`` the launcher starts once every worker is Ready; without a
readinessProbe a pod is Ready as soon as its containers start, long before sshd may listen. Admission warns of
that, and offers an opt-in default: the annotation ``mpijobs.kubeflow.org/worker-readiness-probe: "<sshd's
port>"`` makes the mutating webhook add a ``tcpSocket`` probe on that port to the first Worker container, on
CREATE, when no Worker container has a readinessProbe. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Final

from shared.api import constants as c
from shared.api.types import MPIJob
from shared.jsondict import JSONDict

PROBE_ANNOTATION: Final = "mpijobs.kubeflow.org/worker-readiness-probe"
PROBE_PERIOD_SECONDS: Final = 2  # the launcher is released within ~2 s of sshd listening
_CONTAINERS = "spec.mpiReplicaSpecs[Worker].template.spec.containers"


def default_probe(port: int) -> JSONDict:
    """The readinessProbe the annotation adds: a TCP connect to sshd's ``port`` every 2 seconds."""
    return {"tcpSocket": {"port": port}, "periodSeconds": PROBE_PERIOD_SECONDS}


def probe_port(annotations: object) -> int | None:
    """The port the annotation asks for (1-65535), or None when it is absent or not a port number."""
    value = annotations.get(PROBE_ANNOTATION) if isinstance(annotations, dict) else None
    if not isinstance(value, str) or not value.isdigit() or value != value.strip():
        return None
    port = int(value)
    return port if 0 < port < 65536 else None


def _worker_containers(obj: Any) -> list[Any] | None:
    """The Worker template's containers of an MPIJob dict, or None when it has none to probe."""
    spec = obj.get("spec") if isinstance(obj, dict) else None
    replicas = spec.get("mpiReplicaSpecs") if isinstance(spec, dict) else None
    worker = replicas.get(c.WORKER) if isinstance(replicas, dict) else None
    template = worker.get("template") if isinstance(worker, dict) else None
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
    return containers if isinstance(containers, list) and containers else None


def _has_probe(containers: list[Any]) -> bool:
    return any(isinstance(item, dict) and item.get("readinessProbe") is not None for item in containers)


def probe_patch(obj: JSONDict) -> list[JSONDict]:
    """JSON Patch ``add`` of the default probe to the first Worker container of a new MPIJob dict that asks for
    it (the annotation) and has no Worker readinessProbe; empty otherwise."""
    metadata = obj.get("metadata")
    port = probe_port(metadata.get("annotations") if isinstance(metadata, dict) else None)
    containers = _worker_containers(obj)
    if port is None or containers is None or _has_probe(containers) or not isinstance(containers[0], dict):
        return []
    path = "/spec/mpiReplicaSpecs/Worker/template/spec/containers/0/readinessProbe"
    return [{"op": "add", "path": path, "value": default_probe(port)}]


def readiness_probe_warnings(job: MPIJob) -> list[str]:
    """A WaitForWorkersReady job whose workers have no readinessProbe (the launcher may start before sshd
    listens), and an annotation that is not a port number (no probe is added)."""
    warnings = []
    annotations = job.metadata.get("annotations")
    asked = annotations.get(PROBE_ANNOTATION) if isinstance(annotations, dict) else None
    if asked is not None and probe_port(annotations) is None:
        warnings.append(f"metadata.annotations[{PROBE_ANNOTATION}]: {str(asked)[:40]!r} "
                        "is not a port number (1-65535): no readinessProbe is added")
    policy = job.spec.launcher_creation_policy if job.spec else None
    worker = job.replica_spec(c.WORKER)
    containers = None
    if worker is not None and worker.replicas != 0:
        containers = _worker_containers({"spec": {"mpiReplicaSpecs": {c.WORKER: {"template": worker.template}}}})
    if policy in (None, c.LAUNCHER_AT_STARTUP) or containers is None or _has_probe(containers):
        return warnings
    warnings.append(f"{_CONTAINERS}: no readinessProbe, so a worker is Ready when its containers start, not when "
                    "sshd listens, and the launcher may start too early: add a tcpSocket probe on sshd's port, or "
                    f"the annotation {PROBE_ANNOTATION}: \"<port>\"")
    return warnings
