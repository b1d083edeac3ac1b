"""Kueue (sigs.k8s.io/kueue, built by hack/build/build-kueue.sh) as a local process against a LocalCluster.

    kueue = Kueue(cluster, work_dir, find_kueue())
    kueue.install_crds()      # Kueue's CRDs, conversion webhooks by URL (before the start: it watches them)
    kueue.install_rbac()      # its namespace, ServiceAccount, roles and bindings; a token kubeconfig
    kueue.start(); kueue.wait_ready()
    kueue.register()          # its admission webhooks by URL, then waits until the API server calls them

What differs from Kueue's own deployment (config/default), and why:
- internal certificate management is off (``internalCertManagement.enable: false``): the webhook serving
  pair is issued from the harness CA into ``webhook.certDir`` and the webhook configurations get that CA
  as ``caBundle``. Kueue reads its metrics serving pair from the fixed path ``/etc/kueue/metrics/certs``;
  the process runs in a private mount namespace (``unshare``; a user namespace too when not root) whose
  ``/etc`` is an overlay of the real one plus that directory, so nothing is written outside the work
  directory and parallel runs do not share it.
- every listener is on 127.0.0.1 with a free port; the visibility server (fixed port 8082, certificates
  in ``/visibility``) is off (feature gate ``VisibilityOnDemand=false``); leader election is off.
- the CRDs stay installed after ``stop`` (see there).
- only the webhooks of Kueue's own API and of the enabled frameworks are registered: the others (pods,
  batch Jobs, Deployments, ...) would put Kueue, with failurePolicy Fail, in the path of every other
  test's pods and Jobs. Their rules, failure policies and namespace selectors are Kueue's, as its
  kustomization renders them (the framework webhooks get the ``vpod.kb.io`` namespace selector).
- it runs under its own RBAC, as its kustomization names it: ServiceAccount ``kueue-controller-manager``
  in ``kueue-system`` (a TokenRequest token in its kubeconfig), bound to Kueue's ClusterRole
  (``kueue-manager-role``), its Role for Secrets in ``kueue-system`` and its metrics authentication
  ClusterRole; so the tests also show that Kueue's own permissions are enough with our CRD.
"""

from __future__ import annotations

import base64
import copy
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import processes
from .cluster import CRD_PATH, LocalCluster
from .pki import issue
from .rest import JSON, condition
from .wait import HarnessError, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build" / "build-kueue.sh"
VERSION = os.environ.get("KUEUE_VERSION", "v0.19.2")  # hack/build/build-kueue.sh reads the same variable
NAMESPACE = "kueue-system"
SERVICE_ACCOUNT = "kueue-controller-manager"
NAME_PREFIX = "kueue-"  # config/default/kustomization.yaml: namePrefix
TOKEN_SECONDS = 12 * 3600  # longer than any test session
MPIJOB_FRAMEWORK = "kubeflow.org/mpijob"
METRICS_CERT_DIR = "kueue/metrics/certs"  # under /etc: fixed in Kueue's cmd/kueue/main.go
OWN_API_WEBHOOKS = ("mclusterqueue.kb.io", "mresourceflavor.kb.io", "mworkload.kb.io", "vclusterqueue.kb.io",
                    "vcohort.kb.io", "vresourceflavor.kb.io", "vworkload.kb.io")
FRAMEWORK_WEBHOOKS = {MPIJOB_FRAMEWORK: ("mmpijob.kb.io", "vmpijob.kb.io")}
NAMESPACE_SELECTOR_SOURCE = "vpod.kb.io"  # config/components/webhook/kustomization.yaml: replacements
START_TIMEOUT = 90.0


class KueueUnavailableError(HarnessError):
    """Kueue is not built and cannot be: Go is not installed."""


@dataclass(frozen=True)
class KueueBuild:
    """The binary and, beside it, the manifests copied from the same module (hack/build/build-kueue.sh)."""

    binary: Path

    @property
    def config_dir(self) -> Path:
        return self.binary.parent.parent / "config"

    @property
    def crd_files(self) -> list[Path]:
        return sorted((self.config_dir / "crd").glob("*.yaml"))

    @property
    def conversion_patches(self) -> list[Path]:
        """The patches Kueue's CRD kustomization applies (the commented-out ones are left out)."""
        kustomization = yaml.safe_load((self.config_dir / "crd-patches" / "kustomization.yaml").read_text())
        return [self.config_dir / "crd-patches" / Path(p["path"]).name for p in kustomization.get("patches") or []]

    @property
    def webhook_manifests(self) -> Path:
        return self.config_dir / "webhook" / "manifests.yaml"

    @property
    def webhook_kustomization(self) -> Path:
        return self.config_dir / "webhook" / "kustomization.yaml"

    @property
    def rbac_files(self) -> list[Path]:
        return [self.config_dir / "rbac" / f"{name}.yaml" for name in ("role", "manager_secrets_role",
                                                                       "metrics_auth_role")]


def find_kueue() -> KueueBuild:
    """Kueue's binary and manifests, built on first use (~10 min on 2 cores; the build's progress goes to
    stderr). Raises KueueUnavailableError when it is not built and Go is absent, HarnessError when the
    build fails."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, stderr=None, text=True,
                          cwd=REPO_ROOT, check=False, env={**os.environ, "KUEUE_VERSION": VERSION})
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 2 and shutil.which("go") is None:
        raise KueueUnavailableError(f"Kueue {VERSION} is not built and Go is not installed "
                                    f"({BUILD_SCRIPT.name} builds it from the Go module proxy)")
    if proc.returncode != 0 or not lines:
        raise HarnessError(f"{BUILD_SCRIPT.name} failed with status {proc.returncode} (see its output above)")
    build = KueueBuild(Path(lines[-1]))
    if not os.access(build.binary, os.X_OK) or not all(p.exists() for p in [build.webhook_manifests,
                                                                            *build.rbac_files]):
        raise HarnessError(f"{build.binary.parent.parent} is incomplete: no binary or no manifests")
    return build


def framework_namespace_selector(kustomization: JSON) -> JSON:
    """The namespace selector Kueue's webhook kustomization gives every framework webhook: the one its
    patch sets on vpod.kb.io (kube-system and kueue-system excluded), copied by its replacements."""
    for patch in kustomization.get("patches") or []:
        for hook in (yaml.safe_load(patch.get("patch") or "{}") or {}).get("webhooks") or []:
            if hook.get("name") == NAMESPACE_SELECTOR_SOURCE and hook.get("namespaceSelector"):
                selector: JSON = hook["namespaceSelector"]
                return selector
    raise HarnessError(f"Kueue's webhook kustomization no longer patches {NAMESPACE_SELECTOR_SOURCE}")


class Kueue:
    """One Kueue process for one LocalCluster; ``stop`` undoes ``register`` and stops the process."""

    def __init__(self, cluster: LocalCluster, work_dir: Path, build: KueueBuild, *,
                 frameworks: Sequence[str] = (MPIJOB_FRAMEWORK,), configuration_prefix: str = "kueue-",
                 multikueue: JSON | None = None) -> None:
        """``multikueue``: the Configuration's ``multiKueue`` section (a MultiKueue manager's gcInterval, origin,
        workerLostTimeout), Kueue's defaults when None."""
        self.cluster, self.build, self.frameworks = cluster, build, tuple(frameworks)
        self.multikueue = multikueue
        self.dir = work_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.webhook_port, self.health_port, self.metrics_port = (processes.free_port() for _ in range(3))
        self.prefix = configuration_prefix
        self.process: processes.Process | None = None
        self._crds: list[str] = []

    # ---- names and files
    @property
    def log(self) -> Path:
        return self.dir / "kueue.log"

    @property
    def cert_dir(self) -> Path:
        return self.dir / "webhook-certs"

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kueue.kubeconfig"

    @property
    def mutating_name(self) -> str:
        return f"{self.prefix}mutating-webhook-configuration"

    @property
    def validating_name(self) -> str:
        return f"{self.prefix}validating-webhook-configuration"

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.webhook_port}{path}"

    def ca_bundle(self) -> str:
        return base64.b64encode(self.cluster.ca_file.read_bytes()).decode()

    def configuration(self) -> JSON:
        """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2) for this process."""
        config: JSON = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}"},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(self.cert_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "manageJobsWithoutQueueName": False,
            "integrations": {"frameworks": list(self.frameworks)},
            "featureGates": {"VisibilityOnDemand": False},
        }
        if self.multikueue is not None:
            config["multiKueue"] = copy.deepcopy(self.multikueue)
        return config

    def _write_files(self) -> Path:
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        issue(self.cluster.pki, self.cert_dir / "tls.crt", self.cert_dir / "tls.key", "kueue-webhook", server=True)
        metrics = self.dir / "etc-overlay" / "upper" / METRICS_CERT_DIR
        metrics.mkdir(parents=True, exist_ok=True)
        (self.dir / "etc-overlay" / "work").mkdir(parents=True, exist_ok=True)
        for name in ("tls.crt", "tls.key"):
            shutil.copy2(self.cert_dir / name, metrics / name)
        config = self.dir / "kueue-config.yaml"
        config.write_text(yaml.safe_dump(self.configuration(), sort_keys=False))
        return config

    def argv(self, config: Path) -> list[str]:
        """Kueue's command line inside a private mount namespace whose /etc has its metrics certificates."""
        overlay = self.dir / "etc-overlay"
        user_ns = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        mount = (f"mount -t overlay overlay -o lowerdir=/etc,upperdir={overlay / 'upper'},"
                 f"workdir={overlay / 'work'} /etc")
        return ["unshare", "--mount", "--propagation", "private", *user_ns, "--", "/bin/sh", "-c",
                f'{mount} && exec "$0" "$@"', str(self.build.binary), f"--config={config}",
                f"--kubeconfig={self.kubeconfig}", "--zap-log-level=2"]

    # ---- lifecycle
    def install_crds(self) -> None:
        """Kueue's CRDs, with the conversion webhooks its kustomization adds, served by this process."""
        patches = {}
        for path in self.build.conversion_patches:
            patch = yaml.safe_load(path.read_text())
            webhook = patch["spec"]["conversion"]["webhook"]
            webhook["clientConfig"] = {"url": self.url(webhook["clientConfig"]["service"]["path"]),
                                       "caBundle": self.ca_bundle()}
            patches[patch["metadata"]["name"]] = patch["spec"]["conversion"]
        for path in self.build.crd_files:
            crd = yaml.safe_load(path.read_text())
            name = crd["metadata"]["name"]
            if name in patches:
                crd["spec"]["conversion"] = patches[name]
            self.cluster.rest.apply(CRD_PATH, crd)
            self._crds.append(name)

        def established() -> bool:
            return all(condition(self.cluster.rest.get(f"{CRD_PATH}/{n}"), "Established") == "True"
                       for n in self._crds)

        wait_for(established, START_TIMEOUT, 0.1, what="Kueue's CRDs Established")

    def rbac_objects(self) -> list[JSON]:
        """Kueue's namespace, ServiceAccount, roles and bindings, named as its kustomization names them."""
        subject = {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
        objects: list[JSON] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT,
                                                                        "namespace": NAMESPACE}}]
        for path in self.build.rbac_files:
            role = yaml.safe_load(path.read_text())
            name = NAME_PREFIX + role["metadata"]["name"]
            namespaced = role["kind"] == "Role"
            role["metadata"] = {"name": name, **({"namespace": NAMESPACE} if namespaced else {})}
            binding = {"apiVersion": "rbac.authorization.k8s.io/v1",
                       "kind": "RoleBinding" if namespaced else "ClusterRoleBinding",
                       "metadata": dict(role["metadata"], name=f"{name}binding"),
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"], "name": name},
                       "subjects": [subject]}
            objects += [role, binding]
        return objects

    def install_rbac(self) -> None:
        """Apply ``rbac_objects`` and write a kubeconfig with a token of Kueue's ServiceAccount."""
        self.cluster.kubectl("apply", "-f", "-", check=True, input=yaml.safe_dump_all(self.rbac_objects()))
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"expirationSeconds": TOKEN_SECONDS}}
        token = self.cluster.rest.create(
            f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}/token", request)["status"]["token"]
        config = {"apiVersion": "v1", "kind": "Config",
                  "clusters": [{"name": "local", "cluster": {"server": self.cluster.server,
                                                             "certificate-authority-data": self.ca_bundle()}}],
                  "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
                  "contexts": [{"name": "kueue", "context": {"cluster": "local", "user": SERVICE_ACCOUNT}}],
                  "current-context": "kueue"}
        self.kubeconfig.touch(mode=0o600)
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))

    def start(self) -> None:
        """Start the process (after ``install_crds`` and ``install_rbac``)."""
        config = self._write_files()
        self.process = processes.start("kueue", self.argv(config), self.log, cwd=self.dir)

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Until /readyz answers 200 (Kueue's check: its webhook server is serving)."""
        if self.process is None:
            raise HarnessError("kueue has not been started")
        processes.wait_healthy(self.process, f"http://127.0.0.1:{self.health_port}/readyz", timeout)

    def webhook_configurations(self) -> list[JSON]:
        """Kueue's two webhook configurations, with only its own API's and the enabled frameworks' webhooks,
        pointed at this process by URL with the harness CA."""
        docs = [d for d in yaml.safe_load_all(self.build.webhook_manifests.read_text()) if d]
        selector = framework_namespace_selector(yaml.safe_load(self.build.webhook_kustomization.read_text()))
        wanted = set(OWN_API_WEBHOOKS)
        framework_hooks = {h for f in self.frameworks for h in FRAMEWORK_WEBHOOKS.get(f, ())}
        configs = []
        for doc in docs:
            config = copy.deepcopy(doc)
            mutating = config["kind"] == "MutatingWebhookConfiguration"
            config["metadata"] = {"name": self.mutating_name if mutating else self.validating_name}
            hooks = []
            for hook in config["webhooks"]:
                if hook["name"] not in wanted | framework_hooks:
                    continue
                service = hook["clientConfig"]["service"]
                hook["clientConfig"] = {"url": self.url(service["path"]), "caBundle": self.ca_bundle()}
                if hook["name"] in framework_hooks:
                    hook["namespaceSelector"] = copy.deepcopy(selector)
                hooks.append(hook)
            config["webhooks"] = hooks
            configs.append(config)
        return configs

    def register(self) -> None:
        """Install the webhook configurations, then wait until the API server calls Kueue's MPIJob
        mutator (a server-side dry run of a queued MPIJob comes back suspended)."""
        self.cluster.kubectl("apply", "-f", "-", check=True, input=yaml.safe_dump_all(self.webhook_configurations()))
        wait_for(self._canary_suspended, timeout=60, interval=0.3, what="the API server calling Kueue's webhooks")

    def _canary_suspended(self) -> bool:
        if self.process is not None:
            self.process.check_running()
        canary = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                  "metadata": {"name": "kueue-canary", "namespace": "default",
                               "labels": {"kueue.x-k8s.io/queue-name": "canary"}},
                  "spec": {"mpiReplicaSpecs": {"Launcher": {"template": {"spec": {"containers": [
                      {"name": "c", "image": "i"}]}}}, "Worker": {"replicas": 1, "template": {"spec": {
                          "containers": [{"name": "c", "image": "i"}]}}}}}}
        result = self.cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                                      input=yaml.safe_dump(canary))
        if result.returncode != 0:
            return False
        created: dict[str, Any] = yaml.safe_load(result.stdout)
        return bool(((created.get("spec") or {}).get("runPolicy") or {}).get("suspend"))

    def unregister(self) -> None:
        self.cluster.kubectl("delete", "mutatingwebhookconfiguration", self.mutating_name, "--ignore-not-found")
        self.cluster.kubectl("delete", "validatingwebhookconfiguration", self.validating_name, "--ignore-not-found")

    def stop(self) -> None:
        """Unregister the webhooks, so that no later request depends on this process, and stop it. Kueue's
        CRDs stay: deleting them without Kueue would leave its objects' finalizers in place for good, and
        only requests for their v1beta1 versions need the (then absent) conversion webhook."""
        self.unregister()
        if self.process is not None:
            self.process.stop()
            self.process = None

    def tail(self, lines: int = 40) -> str:
        return processes.log_tail(self.log, lines)
