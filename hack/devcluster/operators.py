"""Run our two components as real processes against a local control plane.

Used by the integration tests, the benchmarks and the demo: ``OperatorWebhook`` serves
``python -m webhook`` over TLS on 127.0.0.1 and registers the webhook configurations we ship
(``deploy/webhook``) with ``clientConfig.url`` and a ``caBundle``; ``OperatorReconciler`` runs
``python -m reconciler`` with a kubeconfig: the cluster's admin one by default, or, as the integration
tests do, the reconciler's own ServiceAccount token (``reconciler_credentials``: ``deploy/rbac`` applied,
a TokenRequest, a kubeconfig). ``GoOperator`` runs the upstream Go mpi-operator (the peer), built from the
Go module proxy by ``build_peer`` (hack/build/build-peer.sh), for the handover test and the peer benchmark.
Each stops exactly the process it started.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from hack.devcluster import LocalCluster, api_v2
from hack.devcluster.processes import bindable, free_port, terminate
from hack.devcluster.wait import wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
WEBHOOK_MANIFESTS = REPO_ROOT / "deploy" / "webhook"
RBAC_MANIFESTS = REPO_ROOT / "deploy" / "rbac"
RECONCILER_DEPLOYMENT = REPO_ROOT / "deploy" / "reconciler" / "deployment.yaml"
TOKEN_LIFETIME = timedelta(hours=12)  # longer than any test session; refreshed below an hour left
PEER_VERSION = "v0.8.2"  # the upstream release the handover test runs; the peer benchmark's default
PEER_LOCK_NAMESPACE = "mpi-operator"  # upstream's manifests: --lock-namespace=mpi-operator
GO_HEALTH_PORT = 8080  # hard-coded in v0.8.2 (cmd/mpi-operator/app/server.go), on every interface
CANARY = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "webhook-canary"},
          "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 2, "template": {"spec": {"containers": [
              {"name": "c", "image": "i"}]}}}}}}

CONVERSION_CANARY = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "conversion-canary"},
                     "spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue", "suspend": True},
                              "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": {"spec": {"containers": [
                                  {"name": "c", "image": "i"}]}}}}}}


class OperatorProcess:
    """One process of ours or the Go operator's, started in its own session with its output appended to ``log``;
    stops exactly the process it started."""

    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        self.name, self.argv, self.log = name, argv, log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("KUBECONFIG", None)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                            cwd=REPO_ROOT, start_new_session=True)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def check_alive(self) -> bool:
        if not self.alive():
            raise RuntimeError(f"{self.name} exited; last log lines:\n{self.tail()}")
        return True

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.alive():
            assert self.process is not None
            self.process.kill()
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.alive():
            assert self.process is not None
            terminate(self.process, grace=15)


class PeerBuildError(RuntimeError):
    """hack/build/build-peer.sh failed (without Go, when the binary is not cached yet)."""


def build_peer(version: str = PEER_VERSION) -> Path:
    """hack/build/build-peer.sh: the Go operator's binary in the cache (built once per version)."""
    script = REPO_ROOT / "hack" / "build" / "build-peer.sh"
    result = subprocess.run(["bash", str(script)], env={**os.environ, "PEER_VERSION": version}, capture_output=True,
                            text=True, check=False)
    if result.returncode != 0:
        raise PeerBuildError(f"hack/build/build-peer.sh failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return Path(result.stdout.strip().splitlines()[-1])


class GoOperator(OperatorProcess):
    """github.com/kubeflow/mpi-operator's ``mpi-operator`` out of cluster with the admin kubeconfig: cluster-wide,
    leader election on (its only mode) with its Lease in ``mpi-operator``, plus ``flags`` (Go's flag package
    takes --x=1 as -x=1)."""

    def __init__(self, binary: Path, cluster: LocalCluster, log: Path, flags: Sequence[str] = (),
                 name: str = "mpi-operator (Go)") -> None:
        argv = [str(binary), f"-kubeConfig={cluster.kubeconfig}", f"-lock-namespace={PEER_LOCK_NAMESPACE}", *flags]
        super().__init__(name, argv, log)

    def start(self) -> None:
        if not bindable(GO_HEALTH_PORT):  # the Go operator binds every interface
            raise RuntimeError(f"port {GO_HEALTH_PORT} is in use: the Go mpi-operator v0.8.2 always serves /healthz "
                               "there and exits when it cannot")
        super().start()

    def logged(self, text: str) -> bool:
        self.check_alive()
        return self.log.exists() and text in self.log.read_text(errors="replace")

    def terminate(self) -> int:
        """SIGTERM, as a Deployment's rollout sends; the exit status once it is gone."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=20)


class OperatorWebhook(OperatorProcess):
    """``python -m webhook`` on 127.0.0.1 with fresh certificates, registered with the API server."""

    def __init__(self, cluster: LocalCluster, work_dir: Path) -> None:
        self.cluster, self.dir = cluster, work_dir / "webhook"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        subprocess.run([sys.executable, "-m", "webhook.certs", "--out-dir", str(self.dir), "--ip", "127.0.0.1",
                        "--dns", "localhost"], check=True, capture_output=True, cwd=REPO_ROOT)
        super().__init__("webhook", [sys.executable, "-m", "webhook", "--port", str(self.port),
                                     "--bind-address", "127.0.0.1", "--tls-cert-file", str(self.dir / "tls.crt"),
                                     "--tls-key-file", str(self.dir / "tls.key")], self.dir / "webhook.log")

    def configurations(self, timeout_seconds: int | None = None) -> list[dict[str, Any]]:
        """Our shipped webhook configurations, pointed at this process by URL with its caBundle."""
        ca_bundle = base64.b64encode((self.dir / "ca.crt").read_bytes()).decode()
        configs = []
        for path in sorted(WEBHOOK_MANIFESTS.glob("*-webhook-configuration.yaml")):
            config = copy.deepcopy(yaml.safe_load(path.read_text()))
            config["metadata"].pop("annotations", None)
            for hook in config["webhooks"]:
                service = hook["clientConfig"].pop("service")
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{self.port}{service['path']}", "caBundle": ca_bundle}
                if timeout_seconds is not None:
                    hook["timeoutSeconds"] = timeout_seconds
            configs.append(config)
        return configs

    def register(self, timeout_seconds: int | None = None) -> None:
        """Install the configurations, then wait until the API server really calls both admission webhooks; with
        kubeflow.org/v2 on (the CRD has a conversion webhook), also point the conversion webhook at this process and
        wait until the API server converts through it."""
        self.cluster.kubectl("apply", "-f", "-", check=True, input=yaml.safe_dump_all(
            self.configurations(timeout_seconds)))
        wait_for(self._canary_denied, timeout=30, interval=0.2, what="the API server calling our webhooks")
        if api_v2.conversion_strategy(self.cluster) == "Webhook":
            self.register_conversion()
            self.wait_converting()

    def enable_v2(self) -> None:
        """Turn kubeflow.org/v2 on as an admin does (api_v2.enable: deploy/crds-v2/), the conversion webhook
        pointed at this process; returns once the API server converts through it."""
        api_v2.enable(self.cluster)
        self.register_conversion()
        self.wait_converting()

    def wait_converting(self) -> None:
        """Until a stored MPIJob reads through kubeflow.org/v2, which needs the conversion webhook."""
        # The canary is managed by MultiKueue, so no reconciler acts on it, and it is created and deleted through
        # v2beta1.
        self.cluster.kubectl("-n", "default", "apply", "-f", "-", check=True,
                             input=yaml.safe_dump(CONVERSION_CANARY))
        try:
            wait_for(self._converts, timeout=30, interval=0.2, what="the API server calling our conversion webhook")
        finally:
            self.cluster.kubectl("-n", "default", "delete", "mpijobs.v2beta1.kubeflow.org", "conversion-canary",
                                 "--ignore-not-found", "--wait=false")

    def conversion_client_config(self) -> dict[str, Any]:
        """The CRD's conversion clientConfig for this process: by URL, with its caBundle."""
        ca_bundle = base64.b64encode((self.dir / "ca.crt").read_bytes()).decode()
        return {"url": f"https://127.0.0.1:{self.port}/convert", "caBundle": ca_bundle}

    def register_conversion(self) -> None:
        """Replace the CRD's conversion clientConfig (the shipped Service) by this process's URL and CA."""
        patch = [{"op": "replace", "path": "/spec/conversion/webhook/clientConfig",
                  "value": self.conversion_client_config()}]
        self.cluster.kubectl("patch", "crd", "mpijobs.kubeflow.org", "--type=json", "-p", json.dumps(patch),
                             check=True)

    def _converts(self) -> bool:
        """A GET through kubeflow.org/v2 succeeds once the API server trusts and reaches this webhook."""
        self.check_alive()
        result = self.cluster.kubectl("-n", "default", "get", "mpijobs.v2.kubeflow.org", "conversion-canary",
                                      "-o", "name")
        return result.returncode == 0

    def unregister(self) -> None:
        self.cluster.kubectl("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
                             "mpijob-webhook", "--ignore-not-found", check=True)

    def _canary_denied(self) -> bool:
        self.check_alive()
        result = self.cluster.kubectl("create", "--dry-run=server", "-n", "default", "-o", "yaml", "-f", "-",
                                      input=yaml.safe_dump(CANARY))
        # kubectl renders our 422 Status like the API server's own validation errors; only our
        # validator knows the launcher "must be 1".
        return 'MPIJob "webhook-canary" is invalid' in result.stderr and "must be 1" in result.stderr

    def wait_ready(self) -> None:
        import ssl  # noqa: PLC0415
        import urllib.request  # noqa: PLC0415

        context = ssl.create_default_context(cafile=str(self.dir / "ca.crt"))

        def ready() -> bool:
            self.check_alive()
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{self.port}/readyz", context=context,
                                            timeout=2) as response:
                    return bool(response.status == 200)
            except OSError:
                return False

        wait_for(ready, timeout=30, interval=0.05, what="the webhook's /readyz")


@dataclass
class ServiceAccountCredentials:
    """A kubeconfig holding a TokenRequest token of one ServiceAccount, and when the token expires."""

    namespace: str
    name: str
    kubeconfig: Path
    expires: datetime

    @property
    def username(self) -> str:
        """The user the API server sees (and writes into the audit log)."""
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    def fresh_for(self, period: timedelta) -> bool:
        return datetime.now(UTC) + period < self.expires


def shipped_reconciler_args() -> list[str]:
    """The container args of the reconciler Deployment we ship."""
    deployment = yaml.safe_load(RECONCILER_DEPLOYMENT.read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return [str(arg) for arg in container.get("args") or []]


def reconciler_service_account() -> tuple[str, str]:
    """The namespace and ServiceAccount the shipped reconciler Deployment runs as."""
    deployment = yaml.safe_load(RECONCILER_DEPLOYMENT.read_text())
    return deployment["metadata"]["namespace"], deployment["spec"]["template"]["spec"]["serviceAccountName"]


def apply_rbac(cluster: LocalCluster) -> None:
    """``kubectl apply -k deploy/rbac``: the Namespace, ServiceAccounts, (Cluster)Roles and bindings we ship."""
    cluster.kubectl("apply", "-k", str(RBAC_MANIFESTS), check=True)


def reconciler_credentials(cluster: LocalCluster, path: Path,
                           lifetime: timedelta = TOKEN_LIFETIME) -> ServiceAccountCredentials:
    """A kubeconfig at ``path`` for the reconciler's ServiceAccount of ``deploy/rbac``, which must be applied:
    a token from the TokenRequest API (bound to nothing but the ServiceAccount) and the cluster's CA."""
    namespace, name = reconciler_service_account()
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"expirationSeconds": int(lifetime.total_seconds())}}
    status = cluster.rest.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", request)["status"]
    expires = datetime.strptime(status["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    user = f"{namespace}-{name}"
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "local", "cluster": {
            "server": cluster.server,
            "certificate-authority-data": base64.b64encode(cluster.ca_file.read_bytes()).decode()}}],
        "users": [{"name": user, "user": {"token": status["token"]}}],
        "contexts": [{"name": user, "context": {"cluster": "local", "user": user}}],
        "current-context": user,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return ServiceAccountCredentials(namespace, name, path, expires)


class OperatorReconciler(OperatorProcess):
    """``python -m reconciler`` against the cluster, without leader election unless asked; as admin unless
    given another ``kubeconfig``."""

    def __init__(self, cluster: LocalCluster, work_dir: Path, *extra: str, name: str = "reconciler",
                 kubeconfig: Path | None = None, as_shipped: bool = False) -> None:
        """``as_shipped``: exactly the container args of ``deploy/reconciler`` (leader election on, the
        default client limits), only the kubeconfig and the two ports added, then ``extra``."""
        self.dir = work_dir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.health_port, self.monitoring_port = free_port(), free_port()
        fast = ["--leader-elect=false", "--kube-api-qps=200", "--kube-api-burst=400",
                "--controller-queue-rate-limit=100", "--threadiness=4"]
        argv = [sys.executable, "-m", "reconciler", *(shipped_reconciler_args() if as_shipped else fast),
                f"--kubeConfig={kubeconfig or cluster.kubeconfig}",
                f"--health-port={self.health_port}", f"--monitoring-port={self.monitoring_port}", *extra]
        super().__init__(name, argv, self.dir / f"{name}.log")

    def log_count(self, text: str) -> int:
        """How many lines of the log contain ``text``."""
        return sum(text in line for line in self.log.read_text(errors="replace").splitlines())

    def wait_ready(self) -> None:
        """Until its caches are synced (its log says so)."""
        wait_for(lambda: self.check_alive() and "caches synced" in self.log.read_text(errors="replace"),
                 timeout=60, interval=0.1, what="the reconciler's caches to sync")


def started(process: OperatorProcess) -> None:
    begin = time.monotonic()
    process.start()
    process.wait_ready()  # type: ignore[attr-defined]
    print(f"{process.name} ready in {time.monotonic() - begin:.2f} s", file=sys.stderr)
