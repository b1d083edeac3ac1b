"""MultiKueue on one machine: a worker control plane running Kueue and our operator, and the objects that let a
manager cluster's Kueue dispatch MPIJobs to it (docs/kueue.md, "MultiKueue").

    worker = WorkerCluster(work_dir, find_kueue()).start()   # its own etcd and API server, Kueue, webhook, reconciler
    for obj in connection_objects("worker-1", worker.manager_kubeconfig()):
        ...                                                    # created on the manager (Secret in kueue-system first)
    worker.stop()

Two LocalClusters run side by side in one process: each has its own work directory, PKI and free ports; Kueue's
metrics certificates live in a private mount namespace per process (kueue.py). The manager reaches the worker's API
server as Kueue's documentation sets it up (``create-multikueue-kubeconfig.sh``): a ServiceAccount ``multikueue-sa``
in the worker's ``kueue-system``, bound to a ClusterRole of what MultiKueue's MPIJob adapter and its Workload
mirroring need, and a kubeconfig with a token of it, stored on the manager in a Secret (key ``kubeconfig``).
"""

from __future__ import annotations

import base64
import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from .cluster import LocalCluster
from .kueue import NAMESPACE, Kueue, KueueBuild
from .nodes import NodePool
from .operators import OperatorReconciler, OperatorWebhook, apply_rbac, reconciler_credentials
from .rest import JSON

REPO_ROOT = Path(__file__).resolve().parents[2]
MPIJOB_CRD = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
CONTROLLER_NAME = "kueue.x-k8s.io/multikueue"  # an AdmissionCheck's controllerName, and the MPIJob's managedBy
SERVICE_ACCOUNT = "multikueue-sa"
KUBECONFIG_KEY = "kubeconfig"
TOKEN_SECONDS = 12 * 3600  # longer than any test session
# What the manager does on a worker for MPIJobs (Kueue's create-multikueue-kubeconfig.sh, with mpijobs for its
# batch Jobs and JobSets): create, watch and delete the remote copy, read its status, mirror the Workload.
WORKER_RULES: list[JSON] = [
    {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs"],
     "verbs": ["create", "delete", "get", "list", "watch"]},
    {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs/status"], "verbs": ["get"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"],
     "verbs": ["create", "delete", "get", "list", "watch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
]


def worker_rbac_objects() -> list[JSON]:
    """The ServiceAccount the manager acts as on a worker, its ClusterRole and binding (in ``kueue-system``)."""
    subject = {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": f"{SERVICE_ACCOUNT}-role"}, "rules": WORKER_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"{SERVICE_ACCOUNT}-crb"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{SERVICE_ACCOUNT}-role"},
         "subjects": [subject]},
    ]


def worker_kubeconfig(worker: LocalCluster, name: str) -> str:
    """Apply ``worker_rbac_objects`` on ``worker`` (its ``kueue-system`` namespace must exist) and return a
    kubeconfig for its API server with a TokenRequest token of ``multikueue-sa``; ``name`` names the cluster."""
    worker.kubectl("apply", "-f", "-", check=True, input=yaml.safe_dump_all(worker_rbac_objects()))
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"expirationSeconds": TOKEN_SECONDS}}
    token = worker.rest.create(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}/token",
                               request)["status"]["token"]
    user = f"{name}-{SERVICE_ACCOUNT}"
    ca = base64.b64encode(worker.ca_file.read_bytes()).decode()
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": worker.server, "certificate-authority-data": ca}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "current-context": name}, sort_keys=False)


def connection_objects(name: str, kubeconfig: str) -> list[JSON]:
    """What an admin creates on the manager for one worker, in order: the kubeconfig Secret in ``kueue-system``,
    the MultiKueueCluster reading it, a MultiKueueConfig of that one cluster and the AdmissionCheck (all ``name``)
    that a ClusterQueue lists to dispatch its jobs there."""
    return [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NAMESPACE},
         "stringData": {KUBECONFIG_KEY: kubeconfig}},
        {"apiVersion": KUEUE_API, "kind": "MultiKueueCluster", "metadata": {"name": name},
         "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": name}}}},
        {"apiVersion": KUEUE_API, "kind": "MultiKueueConfig", "metadata": {"name": name},
         "spec": {"clusters": [name]}},
        {"apiVersion": KUEUE_API, "kind": "AdmissionCheck", "metadata": {"name": name},
         "spec": {"controllerName": CONTROLLER_NAME,
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": name}}},
    ]


class WorkerCluster:
    """A worker cluster: its own control plane (the MPIJob CRD, ``nodes`` kwok nodes), Kueue with the MPIJob
    framework, our webhook and our reconciler (as ``deploy/rbac``'s ServiceAccount). ``stop`` undoes it all."""

    def __init__(self, work_dir: Path, build: KueueBuild, *, nodes: int = 2, bin_dir: Path | None = None,
                 keep_logs: Path | None = None) -> None:
        self.dir = work_dir
        self.cluster = LocalCluster(nodes=NodePool(count=nodes, name_prefix="worker-node-"), crds=[MPIJOB_CRD],
                                    bin_dir=bin_dir, keep_logs=keep_logs, verbose=False)
        self.build = build
        self.kueue: Kueue | None = None
        self.webhook: OperatorWebhook | None = None
        self.reconciler: OperatorReconciler | None = None
        self.timings: dict[str, float] = {}

    def start(self) -> WorkerCluster:
        """Start everything, in order; on failure, stop what was started and re-raise."""
        try:
            self._timed("control plane", self.cluster.start)
            self._timed("kueue", self._start_kueue)
            self._timed("operator", self._start_operator)
        except BaseException:
            self.stop()
            raise
        return self

    def _timed(self, what: str, step: Callable[[], object]) -> None:
        began = time.monotonic()
        step()
        self.timings[what] = time.monotonic() - began

    def _start_kueue(self) -> None:
        self.kueue = Kueue(self.cluster, self.dir / "kueue", self.build)
        self.kueue.install_crds()
        self.kueue.install_rbac()
        self.kueue.start()
        self.kueue.wait_ready()
        self.kueue.register()

    def _start_operator(self) -> None:
        self.webhook = OperatorWebhook(self.cluster, self.dir / "operator")
        self.webhook.start()
        self.webhook.wait_ready()
        self.webhook.register()
        apply_rbac(self.cluster)
        credentials = reconciler_credentials(self.cluster, self.dir / "operator" / "reconciler.kubeconfig")
        self.reconciler = OperatorReconciler(self.cluster, self.dir / "operator", name="worker-reconciler",
                                             kubeconfig=credentials.kubeconfig)
        self.reconciler.start()
        self.reconciler.wait_ready()

    def manager_kubeconfig(self, name: str) -> str:
        """The kubeconfig the manager's Secret holds for this worker (``worker_kubeconfig``)."""
        return worker_kubeconfig(self.cluster, name)

    def logs(self) -> dict[str, Path]:
        """The logs of the processes this class started beside the control plane's own, by name."""
        found = {"kueue": self.kueue.log if self.kueue else None,
                 "webhook": self.webhook.log if self.webhook else None,
                 "reconciler": self.reconciler.log if self.reconciler else None}
        return {name: path for name, path in found.items() if path is not None}

    def stop(self) -> None:
        """Stop the reconciler, the webhook and Kueue, then the control plane (which removes its data)."""
        for process in (self.reconciler, self.webhook):
            if process is not None:
                with contextlib.suppress(Exception):
                    process.stop()
        if self.kueue is not None and self.kueue.process is not None:
            self.kueue.process.stop()  # not Kueue.stop: the webhook configurations go with the cluster
            self.kueue.process = None
        self.cluster.stop()
