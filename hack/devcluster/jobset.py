"""The JobSet controller (sigs.k8s.io/jobset, built by hack/build/build-jobset.sh) as a local process against a
LocalCluster, for the test of ``python -m reconciler render --as jobset`` (tests/e2e/test_jobset.py).

    jobset = JobSetController(cluster, work_dir, find_jobset())
    jobset.install_crd()                 # the JobSet CRD (before the start: the controller watches it)
    jobset.start(); jobset.wait_ready()
    jobset.register()                    # its four admission webhooks by URL, then waits until they answer

What differs from JobSet's own deployment (config/default), and why:
- internal certificate management is off (``internalCertManagement.enable: false``): the webhook serving pair
  is issued from the harness CA into ``webhook.certDir`` and the webhook configurations get that CA as
  ``caBundle`` and the process's URL; the pod webhooks keep the objectSelector JobSet's kustomization patches
  in (``jobset.sigs.k8s.io/jobset-name`` Exists), so no other pod goes through them.
- every listener is on 127.0.0.1 with a free port; the metrics server is off (``bindAddress: "0"``); leader
  election is off.
- it runs with the harness's admin kubeconfig, not under JobSet's RBAC.
- the CRD stays installed after ``stop``: JobSets left behind keep no finalizer, so they are still deleted.
"""

from __future__ import annotations

import base64
import copy
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import processes
from .cluster import CRD_PATH, LocalCluster
from .gomodules import GoUnavailableError, module_dir
from .pki import issue
from .rest import JSON, condition
from .wait import HarnessError, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build" / "build-jobset.sh"
VERSION = os.environ.get("JOBSET_VERSION", "v0.12.0")  # hack/build/build-jobset.sh reads the same variable
CONFIGURATION_PREFIX = "jobset-"
START_TIMEOUT = 90.0
PATCH_PATH = re.compile(r"^/webhooks/(\d+)$")


class JobSetUnavailableError(GoUnavailableError):
    """The JobSet controller is not built and cannot be: Go is not installed."""


@dataclass(frozen=True)
class JobSetBuild:
    """The binary and, beside it, the manifests copied from the same module (hack/build/build-jobset.sh)."""

    binary: Path

    @property
    def config_dir(self) -> Path:
        return self.binary.parent.parent / "config"

    @property
    def crd_files(self) -> list[Path]:
        return sorted((self.config_dir / "crd").glob("*.yaml"))

    @property
    def webhook_manifests(self) -> Path:
        return self.config_dir / "webhook" / "manifests.yaml"

    @property
    def webhook_patches(self) -> dict[str, Path]:
        """The patch file the webhook kustomization applies to each configuration, by the configuration's name."""
        kustomization = yaml.safe_load((self.config_dir / "webhook" / "kustomization.yaml").read_text())
        return {p["target"]["name"]: self.config_dir / "webhook" / "patches" / Path(p["path"]).name
                for p in kustomization.get("patches") or []}


def find_jobset() -> JobSetBuild:
    """JobSet's binary and manifests, built on first use (several minutes on 2 cores; the build's progress goes
    to stderr). Raises JobSetUnavailableError when it is not built and Go is absent, HarnessError when the
    build fails."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, stderr=None, text=True,
                          cwd=REPO_ROOT, check=False, env={**os.environ, "JOBSET_VERSION": VERSION})
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 2 and shutil.which("go") is None:
        raise JobSetUnavailableError(f"JobSet {VERSION} is not built and Go is not installed "
                                     f"({BUILD_SCRIPT.name} builds it from the Go module proxy)")
    if proc.returncode != 0 or not lines:
        raise HarnessError(f"{BUILD_SCRIPT.name} failed with status {proc.returncode} (see its output above)")
    build = JobSetBuild(Path(lines[-1]))
    if not os.access(build.binary, os.X_OK) or not build.webhook_manifests.exists() or not build.crd_files:
        raise HarnessError(f"{build.binary.parent.parent} is incomplete: no binary or no manifests")
    return build


TRAINER_MODULE, TRAINER_VERSION = "github.com/kubeflow/trainer/v2", "v2.3.0"
JOBSET_CRD = "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
TRAINER_CRDS = "manifests/base/crds"


def export_crds() -> list[Path]:
    """The CRDs of the exports of ``render --as``: JobSet's (VERSION) and Kubeflow Trainer's (TRAINER_VERSION),
    from their modules, without building anything."""
    trainer = sorted((module_dir(TRAINER_MODULE, TRAINER_VERSION) / TRAINER_CRDS).glob("trainer.kubeflow.org_*.yaml"))
    return [module_dir("sigs.k8s.io/jobset", VERSION) / JOBSET_CRD, *trainer]


def install_crds(cluster: LocalCluster, paths: list[Path]) -> None:
    """Apply CRDs and wait until they are Established."""
    names = []
    for path in paths:
        crd = yaml.safe_load(path.read_text())
        cluster.rest.apply(CRD_PATH, crd)
        names.append(crd["metadata"]["name"])

    def established() -> bool:
        return all(condition(cluster.rest.get(f"{CRD_PATH}/{n}"), "Established") == "True" for n in names)

    wait_for(established, START_TIMEOUT, 0.1, what=f"CRDs {', '.join(names)} Established")


def patched(configuration: JSON, patch: list[JSON]) -> JSON:
    """A webhook configuration with the kustomization's JSON patch applied (its operations replace whole
    webhooks: ``replace /webhooks/<i>``)."""
    result = copy.deepcopy(configuration)
    for operation in patch:
        match = PATCH_PATH.match(operation.get("path", ""))
        if operation.get("op") != "replace" or match is None:
            raise HarnessError(f"JobSet's webhook patch has an operation this harness does not apply: {operation}")
        result["webhooks"][int(match.group(1))] = copy.deepcopy(operation["value"])
    return result


class JobSetController:
    """One JobSet controller process for one LocalCluster; ``stop`` undoes ``register`` and stops it."""

    def __init__(self, cluster: LocalCluster, work_dir: Path, build: JobSetBuild) -> None:
        self.cluster, self.build = cluster, build
        self.dir = work_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.webhook_port, self.health_port = processes.free_port(), processes.free_port()
        self.process: processes.Process | None = None

    @property
    def log(self) -> Path:
        return self.dir / "jobset.log"

    @property
    def cert_dir(self) -> Path:
        return self.dir / "webhook-certs"

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.webhook_port}{path}"

    def ca_bundle(self) -> str:
        return base64.b64encode(self.cluster.ca_file.read_bytes()).decode()

    def configuration(self) -> JSON:
        """JobSet's Configuration (config.jobset.x-k8s.io/v1alpha1) for this process."""
        return {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(self.cert_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
        }

    def install_crd(self) -> None:
        install_crds(self.cluster, self.build.crd_files)

    def start(self) -> None:
        """Start the process (after ``install_crd``)."""
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        issue(self.cluster.pki, self.cert_dir / "tls.crt", self.cert_dir / "tls.key", "jobset-webhook", server=True)
        config = self.dir / "jobset-config.yaml"
        config.write_text(yaml.safe_dump(self.configuration(), sort_keys=False))
        argv = [str(self.build.binary), f"--config={config}", f"--kubeconfig={self.cluster.kubeconfig}",
                "--zap-log-level=2"]
        self.process = processes.start("jobset", argv, self.log, cwd=self.dir)

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Until /readyz answers 200 (JobSet's check: its webhook server is serving)."""
        if self.process is None:
            raise HarnessError("the JobSet controller has not been started")
        processes.wait_healthy(self.process, f"http://127.0.0.1:{self.health_port}/readyz", timeout)

    def webhook_configurations(self) -> list[JSON]:
        """JobSet's two webhook configurations as its kustomization renders them, pointed at this process by
        URL with the harness CA, named ``jobset-<name>``."""
        patches = self.build.webhook_patches
        configs = []
        for doc in yaml.safe_load_all(self.build.webhook_manifests.read_text()):
            if not doc:
                continue
            name = doc["metadata"]["name"]
            config = patched(doc, yaml.safe_load(patches[name].read_text())) if name in patches else copy.deepcopy(doc)
            config["metadata"] = {"name": CONFIGURATION_PREFIX + name}
            for hook in config["webhooks"]:
                hook["clientConfig"] = {"url": self.url(hook["clientConfig"]["service"]["path"]),
                                        "caBundle": self.ca_bundle()}
            configs.append(config)
        return configs

    def register(self) -> None:
        """Install the webhook configurations, then wait until the API server calls JobSet's defaulting
        webhook (a server-side dry run of a JobSet comes back with its defaults)."""
        self.cluster.kubectl("apply", "-f", "-", check=True, input=yaml.safe_dump_all(self.webhook_configurations()))
        wait_for(self._canary_defaulted, timeout=60, interval=0.3, what="the API server calling JobSet's webhooks")

    def _canary_defaulted(self) -> bool:
        if self.process is not None:
            self.process.check_running()
        canary = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                  "metadata": {"name": "jobset-canary", "namespace": "default"},
                  "spec": {"replicatedJobs": [{"name": "r", "replicas": 1, "template": {"spec": {"template": {
                      "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}]}}
        result = self.cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                                      input=yaml.safe_dump(canary))
        if result.returncode != 0:
            return False
        created: JSON = yaml.safe_load(result.stdout)
        job_spec = created["spec"]["replicatedJobs"][0]["template"]["spec"]
        return bool(job_spec.get("completionMode") == "Indexed")

    def unregister(self) -> None:
        for kind in ("mutating", "validating"):
            self.cluster.kubectl("delete", f"{kind}webhookconfiguration",
                                 f"{CONFIGURATION_PREFIX}{kind}-webhook-configuration", "--ignore-not-found")

    def stop(self) -> None:
        """Unregister the webhooks, so that no later request depends on this process, and stop it."""
        self.unregister()
        if self.process is not None:
            self.process.stop()
            self.process = None

    def tail(self, lines: int = 40) -> str:
        return processes.log_tail(self.log, lines)
