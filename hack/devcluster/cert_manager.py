"""cert-manager (github.com/cert-manager/cert-manager, built by hack/build/build-cert-manager.sh) as three local
processes against a LocalCluster, for the test of the operator's default certificate path
(tests/e2e/test_cert_manager.py): its controller, its cainjector and its webhook.

    cm = CertManager(cluster, work_dir, find_cert_manager())
    cm.install_crds()        # cert-manager's six CRDs (before the start: the controller watches them)
    cm.start()               # webhook, then its webhook configurations by URL, then cainjector and controller
    cm.wait_ready()          # a canary Certificate issued and its CA injected into a canary configuration
    ...
    cm.stop()                # its webhook configurations removed, the three processes stopped

What differs from cert-manager's own chart (deploy/charts/cert-manager of the same module), and why:
- the webhook serves a pair issued from the harness CA (``--tls-cert-file``, ``--tls-private-key-file``) instead
  of its dynamic self-signed CA in a Secret, and its two webhook configurations (the chart's rules, match policy,
  failure policy ``Fail``, timeout and namespace selector) reach it by URL, https://127.0.0.1:<port>/mutate and
  /validate, with the harness CA as ``caBundle`` (not injected by cainjector, as the chart's are). So every
  Issuer and Certificate the tests create goes through cert-manager's own admission, as in a real install.
- leader election is on, as shipped (Leases in kube-system, cert-manager's default durations); one replica of
  each, so each takes its Lease at once (``wait_ready`` waits for both Leases' holders).
- the controller's cluster resource namespace is ``cert-manager`` (the chart's: the release's namespace), its
  metrics listen on 127.0.0.1 with a free port; the webhook's health port is a free port too.
- the three run with the harness's admin kubeconfig, not under cert-manager's RBAC.
- the CRDs stay installed after ``stop``, and so do cert-manager objects left in namespaces that are not deleted
  (they carry no finalizer).
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import processes
from .cluster import LocalCluster
from .jobset import install_crds
from .pki import issue
from .rest import JSON, ApiError, condition
from .wait import HarnessError, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build" / "build-cert-manager.sh"
# The newest release whose module on the Go module proxy holds the main packages (hack/build/build-cert-manager.sh
# says why); the build script reads the same variable.
VERSION = os.environ.get("CERT_MANAGER_VERSION", "v1.11.5")
NAMESPACE = "cert-manager"  # the chart's release namespace: the controller's cluster resource namespace
LEADER_ELECTION_NAMESPACE = "kube-system"  # cert-manager's default (cmd/util/defaults.go)
LEASES = ("cert-manager-controller", "cert-manager-cainjector-leader-election")
WEBHOOK_NAME = "webhook.cert-manager.io"
CONFIGURATION_NAME = "cert-manager-webhook"  # the chart's (webhook.fullname)
CANARY = "harness-canary"
START_TIMEOUT = 120.0
WEBHOOK_TIMEOUT_SECONDS = 10  # the chart's webhook.timeoutSeconds
ISSUERS = f"/apis/cert-manager.io/v1/namespaces/{NAMESPACE}/issuers"
CERTIFICATES = f"/apis/cert-manager.io/v1/namespaces/{NAMESPACE}/certificates"
VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


class CertManagerUnavailableError(HarnessError):
    """cert-manager is not built and cannot be: Go is not installed."""


@dataclass(frozen=True)
class CertManagerBuild:
    """The three binaries and, beside them, the CRDs made plain YAML (hack/build/build-cert-manager.sh)."""

    bin_dir: Path

    def binary(self, name: str) -> Path:
        return self.bin_dir / name

    @property
    def crd_files(self) -> list[Path]:
        return sorted((self.bin_dir.parent / "config" / "crd").glob("crd-*.yaml"))


def find_cert_manager() -> CertManagerBuild:
    """cert-manager's binaries and CRDs, built on first use (many minutes on 2 cores; the build's progress goes to
    stderr). Raises CertManagerUnavailableError when they are not built and Go is absent, HarnessError when the
    build fails."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, stderr=None, text=True,
                          cwd=REPO_ROOT, check=False, env={**os.environ, "CERT_MANAGER_VERSION": VERSION})
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 2 and shutil.which("go") is None:
        raise CertManagerUnavailableError(f"cert-manager {VERSION} is not built and Go is not installed "
                                          f"({BUILD_SCRIPT.name} builds it from the Go module proxy)")
    if proc.returncode != 0 or not lines:
        raise HarnessError(f"{BUILD_SCRIPT.name} failed with status {proc.returncode} (see its output above)")
    build = CertManagerBuild(Path(lines[-1]))
    missing = [b for b in ("controller", "cainjector", "webhook") if not os.access(build.binary(b), os.X_OK)]
    if missing or len(build.crd_files) != 6:
        raise HarnessError(f"{build.bin_dir.parent} is incomplete: binaries missing {missing}, "
                           f"{len(build.crd_files)} CRDs of 6")
    return build


def webhook_rules() -> list[JSON]:
    """The rules of both of cert-manager's webhook configurations (its chart's)."""
    return [{"apiGroups": ["cert-manager.io", "acme.cert-manager.io"], "apiVersions": ["v1"],
             "operations": ["CREATE", "UPDATE"], "resources": ["*/*"]}]


class CertManager:
    """cert-manager's controller, cainjector and webhook for one LocalCluster."""

    def __init__(self, cluster: LocalCluster, work_dir: Path, build: CertManagerBuild) -> None:
        self.cluster, self.build = cluster, build
        self.dir = work_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.webhook_port, self.healthz_port = processes.free_port(), processes.free_port()
        self.metrics_port = processes.free_port()
        self.processes: dict[str, processes.Process] = {}

    def log(self, name: str) -> Path:
        return self.dir / f"{name}.log"

    @property
    def cert_dir(self) -> Path:
        return self.dir / "webhook-certs"

    def ca_bundle(self) -> str:
        return base64.b64encode(self.cluster.ca_file.read_bytes()).decode()

    def install_crds(self) -> None:
        install_crds(self.cluster, self.build.crd_files)

    def _start(self, name: str, argv: list[str]) -> processes.Process:
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        proc = processes.start(f"cert-manager-{name}", [str(self.build.binary(name)), *argv], self.log(name),
                               env=env, cwd=self.dir)
        self.processes[name] = proc
        return proc

    def start(self) -> None:
        """Start the webhook, register it, then start cainjector and the controller (after ``install_crds``)."""
        self.cluster.kubectl("create", "namespace", NAMESPACE, check=False)
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        issue(self.cluster.pki, self.cert_dir / "tls.crt", self.cert_dir / "tls.key", "cert-manager-webhook",
              server=True)
        webhook = self._start("webhook", [
            f"--kubeconfig={self.cluster.kubeconfig}", f"--secure-port={self.webhook_port}",
            f"--healthz-port={self.healthz_port}", f"--tls-cert-file={self.cert_dir / 'tls.crt'}",
            f"--tls-private-key-file={self.cert_dir / 'tls.key'}", "--v=2"])
        processes.wait_healthy(webhook, f"http://127.0.0.1:{self.healthz_port}/healthz", START_TIMEOUT)
        self.register()
        self._start("cainjector", [f"--kubeconfig={self.cluster.kubeconfig}", "--v=2",
                                   f"--leader-election-namespace={LEADER_ELECTION_NAMESPACE}"])
        self._start("controller", [
            f"--kubeconfig={self.cluster.kubeconfig}", "--v=2", f"--cluster-resource-namespace={NAMESPACE}",
            f"--leader-election-namespace={LEADER_ELECTION_NAMESPACE}",
            f"--metrics-listen-address=127.0.0.1:{self.metrics_port}"])

    def webhook_configurations(self) -> list[JSON]:
        """cert-manager's two webhook configurations as its chart renders them, by URL to this webhook."""
        def hook(path: str) -> JSON:
            return {"name": WEBHOOK_NAME, "rules": webhook_rules(), "admissionReviewVersions": ["v1"],
                    "matchPolicy": "Equivalent", "timeoutSeconds": WEBHOOK_TIMEOUT_SECONDS, "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "clientConfig": {"url": f"https://127.0.0.1:{self.webhook_port}{path}",
                                     "caBundle": self.ca_bundle()}}

        validating = hook("/validate")
        validating["namespaceSelector"] = {"matchExpressions": [
            {"key": "cert-manager.io/disable-validation", "operator": "NotIn", "values": ["true"]},
            {"key": "name", "operator": "NotIn", "values": [NAMESPACE]}]}
        meta = {"name": CONFIGURATION_NAME, "labels": {"app.kubernetes.io/name": "webhook",
                                                       "app.kubernetes.io/instance": "cert-manager"}}
        return [
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
             "metadata": meta, "webhooks": [hook("/mutate")]},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
             "metadata": meta, "webhooks": [validating]},
        ]

    def register(self) -> None:
        """Install the webhook configurations, then wait until the API server calls cert-manager's webhook (a
        server-side dry run of an Issuer with no issuer type is denied by it)."""
        self.cluster.kubectl("apply", "-f", "-", check=True, input=yaml.safe_dump_all(self.webhook_configurations()))
        wait_for(self._empty_issuer_denied, timeout=60, interval=0.3,
                 what="the API server calling cert-manager's webhook")

    def _empty_issuer_denied(self) -> bool:
        self.processes["webhook"].check_running()
        issuer = {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
                  "metadata": {"name": "harness-empty", "namespace": "default"}, "spec": {}}
        result = self.cluster.kubectl("create", "--dry-run=server", "-f", "-", input=yaml.safe_dump(issuer))
        return result.returncode != 0 and f'admission webhook "{WEBHOOK_NAME}" denied the request' in result.stderr

    def lease_holders(self) -> dict[str, str]:
        """The holder of each of cert-manager's Leases ("" when none)."""
        holders = {}
        for name in LEASES:
            try:
                lease = self.cluster.rest.get(
                    f"/apis/coordination.k8s.io/v1/namespaces/{LEADER_ELECTION_NAMESPACE}/leases/{name}")
            except ApiError as err:
                if err.status != 404:
                    raise
                holders[name] = ""
                continue
            holders[name] = str(lease["spec"].get("holderIdentity") or "")
        return holders

    def check_running(self) -> None:
        for proc in self.processes.values():
            proc.check_running()

    def wait_ready(self, timeout: float = START_TIMEOUT) -> float:
        """Until the controller and cainjector lead (their Leases held) and sync: a canary Certificate from a
        self-signed Issuer becomes Ready (the controller) and its CA lands in the caBundle of a canary validating
        webhook configuration annotated ``cert-manager.io/inject-ca-from`` (cainjector). The canaries are deleted
        again. Returns the seconds waited."""
        began = time.monotonic()

        def leading() -> bool:
            self.check_running()
            return all(self.lease_holders().values())

        try:
            wait_for(leading, timeout, 0.3, what="cert-manager's controller and cainjector holding their Leases")
            self._canary(began + timeout)
        except HarnessError as err:
            raise HarnessError(f"{err}\n{self.tail()}") from None
        return time.monotonic() - began

    def _canary(self, deadline: float) -> None:
        rest = self.cluster.rest
        issuer = {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
                  "metadata": {"name": CANARY, "namespace": NAMESPACE}, "spec": {"selfSigned": {}}}
        certificate = {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
                       "metadata": {"name": CANARY, "namespace": NAMESPACE},
                       "spec": {"isCA": True, "commonName": CANARY, "secretName": f"{CANARY}-tls",
                                "privateKey": {"algorithm": "ECDSA", "size": 256},
                                "issuerRef": {"kind": "Issuer", "name": CANARY}}}
        configuration = {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": CANARY, "annotations": {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/{CANARY}"}},
            # Matches no request anyone makes: a group that does not exist.
            "webhooks": [{"name": "canary.harness.invalid", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "failurePolicy": "Ignore", "rules": [{"apiGroups": ["harness.invalid"], "apiVersions": ["v1"],
                                                                "operations": ["CREATE"], "resources": ["none"]}],
                          "clientConfig": {"url": "https://127.0.0.1:1/canary"}}]}
        rest.apply(ISSUERS, issuer)
        rest.apply(CERTIFICATES, certificate)
        rest.apply(VALIDATING, configuration)

        def issued() -> bool:
            self.check_running()
            return condition(rest.get(f"{CERTIFICATES}/{CANARY}"), "Ready") == "True"

        def injected() -> bool:
            self.check_running()
            secret = rest.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{CANARY}-tls")
            bundle = rest.get(f"{VALIDATING}/{CANARY}")["webhooks"][0]["clientConfig"].get("caBundle")
            return bool(bundle) and bundle == secret["data"]["ca.crt"]

        wait_for(issued, max(deadline - time.monotonic(), 1.0), 0.3, what="the canary Certificate Ready")
        wait_for(injected, max(deadline - time.monotonic(), 1.0), 0.3, what="the canary's CA injected by cainjector")
        for path in (f"{VALIDATING}/{CANARY}", f"{CERTIFICATES}/{CANARY}", f"{ISSUERS}/{CANARY}",
                     f"/api/v1/namespaces/{NAMESPACE}/secrets/{CANARY}-tls"):
            rest.delete(path)

    def unregister(self) -> None:
        for kind in ("mutating", "validating"):
            self.cluster.kubectl("delete", f"{kind}webhookconfiguration", CONFIGURATION_NAME, "--ignore-not-found")

    def stop(self) -> None:
        """Unregister the webhook, so that no later request depends on it, and stop the three processes."""
        self.unregister()
        for name in ("controller", "cainjector", "webhook"):
            proc = self.processes.pop(name, None)
            if proc is not None:
                proc.stop()

    def tail(self, lines: int = 20) -> str:
        return "\n".join(f"--- {name}:\n{processes.log_tail(self.log(name), lines)}" for name in self.processes)
