"""Synthetic MPIJob bodies of a chosen size, shaped like real ones, for benchmarks."""

from __future__ import annotations

from typing import Any


def _container(name: str, env_count: int, gpus: int = 0) -> dict[str, Any]:
    limits: dict[str, Any] = {"cpu": "8", "memory": "32Gi"}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    return {
        "name": name,
        "image": "registry.example.com/ml/horovod-pytorch:2.5.1-cuda12.4",
        "imagePullPolicy": "IfNotPresent",
        "command": ["mpirun"] if name == "launcher" else ["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"],
        "args": ["-np", "64", "-bind-to", "none", "-map-by", "slot", "-x", "NCCL_DEBUG=INFO", "python", "/train.py"],
        "env": [{"name": f"TRAINING_SETTING_{i:04d}", "value": f"value-{i:04d}-" + "x" * 40} for i in range(env_count)],
        "resources": {"limits": limits, "requests": dict(limits)},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "shm", "mountPath": "/dev/shm"}],
        "securityContext": {"runAsUser": 1000, "allowPrivilegeEscalation": False},
    }


def _template(role: str, env_count: int, gpus: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "train", "role": role}, "annotations": {"team": "ml-platform"}},
        "spec": {
            "containers": [_container(role, env_count, gpus)],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}},
                {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                       "values": ["p4d.24xlarge", "p5.48xlarge"]}]}]}}},
        },
    }


def mpijob(name: str, env_count: int, *, workers: int = 1000, namespace: str = "default") -> dict[str, Any]:
    """A valid MPIJob (user input: no defaults applied) whose size grows with ``env_count``."""
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {"team": "ml"}},
        "spec": {
            "slotsPerWorker": 8,
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 3},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": _template("launcher", env_count)},
                "Worker": {"replicas": workers, "template": _template("worker", env_count, gpus=8)},
            },
        },
    }


def mpijob_of_size(name: str, target_bytes: int, **kwargs: Any) -> dict[str, Any]:
    """An MPIJob whose compact JSON is close to (not above) ``target_bytes``."""
    import orjson  # noqa: PLC0415

    env_count = 0
    while len(orjson.dumps(mpijob(name, env_count + 1, **kwargs))) <= target_bytes:
        env_count += 1
    return mpijob(name, env_count, **kwargs)


def admission_review(obj: dict[str, Any], uid: str = "5f0f8c5e-0000-4000-8000-000000000001") -> dict[str, Any]:
    """A CREATE AdmissionReview for ``obj`` as the API server sends it."""
    gvk = {"group": "kubeflow.org", "version": "v2beta1", "kind": "MPIJob"}
    gvr = {"group": "kubeflow.org", "version": "v2beta1", "resource": "mpijobs"}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"], "operation": "CREATE",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]}, "object": obj, "oldObject": None,
        "dryRun": False, "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}}
