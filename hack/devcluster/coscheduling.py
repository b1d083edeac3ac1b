"""scheduler-plugins' Coscheduling (sigs.k8s.io/scheduler-plugins, built by hack/build/build-scheduler-plugins.sh)
as a second scheduler of a LocalCluster, with its PodGroup controller and its CRDs.

    build = find_scheduler_plugins()
    gang = Coscheduling(cluster, work_dir, build)
    gang.install_crds()       # the module's own config/crd/bases CRDs (PodGroup, ElasticQuota; scheduling.x-k8s.io)
    gang.start(); gang.wait_ready()

The scheduler is named ``scheduler-plugins-scheduler`` (the name upstream's e2e suite gives it) and runs one
profile: the module's manifests/coscheduling/scheduler-config.yaml (Coscheduling at every extension point and
as the queue sort), with our client limits, leader election off and the listener on 127.0.0.1, and a pod
it found unschedulable retried after 10 s rather than 5 minutes when no event requeues it (a node added is
no such event for Coscheduling). The default kube-scheduler keeps every other pod. Both processes use the
admin kubeconfig, as the harness's kube-scheduler does. The CRDs stay installed after ``stop``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import processes
from .cluster import CRD_PATH, LocalCluster
from .rest import JSON, condition
from .wait import HarnessError, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build" / "build-scheduler-plugins.sh"
VERSION = os.environ.get("SCHEDULER_PLUGINS_VERSION", "v0.34.7")  # the build script reads the same variable
SCHEDULER_NAME = "scheduler-plugins-scheduler"
PERMIT_WAITING_TIME_SECONDS = 10  # manifests/coscheduling/scheduler-config.yaml
START_TIMEOUT = 90.0
POD_GROUP_CRD = "scheduling.x-k8s.io_podgroups.yaml"
# A pod Coscheduling rejected is retried on a pod or PodGroup event only (its EventsToRegister), not when a
# node is added; otherwise after this long (the scheduler's default: 5 minutes).
UNSCHEDULABLE_RETRY = "10s"


class SchedulerPluginsUnavailableError(HarnessError):
    """scheduler-plugins is not built and cannot be: Go is not installed."""


@dataclass(frozen=True)
class SchedulerPluginsBuild:
    """The directory hack/build/build-scheduler-plugins.sh fills: bin/scheduler, bin/controller, crd/."""

    root: Path

    @property
    def scheduler(self) -> Path:
        return self.root / "bin" / "scheduler"

    @property
    def controller(self) -> Path:
        return self.root / "bin" / "controller"

    @property
    def crds(self) -> list[Path]:
        """PodGroup and ElasticQuota: the controller waits for both caches, or exits."""
        return sorted((self.root / "crd").glob("*.yaml"))


def find_scheduler_plugins() -> SchedulerPluginsBuild:
    """The binaries and CRD, built on first use (the build's progress goes to stderr). Raises
    SchedulerPluginsUnavailableError without Go, HarnessError when the build fails."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, stderr=None, text=True,
                          cwd=REPO_ROOT, check=False, env={**os.environ, "SCHEDULER_PLUGINS_VERSION": VERSION})
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 2 and shutil.which("go") is None:
        raise SchedulerPluginsUnavailableError(f"scheduler-plugins {VERSION} is not built and Go is not installed "
                                               f"({BUILD_SCRIPT.name} builds it from the Go module proxy)")
    if proc.returncode != 0 or not lines:
        raise HarnessError(f"{BUILD_SCRIPT.name} failed with status {proc.returncode} (see its output above)")
    build = SchedulerPluginsBuild(Path(lines[-1]))
    names = {p.name for p in build.crds}
    if not all(os.access(b, os.X_OK) for b in (build.scheduler, build.controller)) or POD_GROUP_CRD not in names:
        raise HarnessError(f"{build.root} is incomplete: no binaries or no PodGroup CRD")
    return build


def scheduler_configuration(kubeconfig: Path) -> JSON:
    """The KubeSchedulerConfiguration of the second scheduler: one Coscheduling profile."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
        "profiles": [{
            "schedulerName": SCHEDULER_NAME,
            "plugins": {"multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                        "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}},
            "pluginConfig": [{"name": "Coscheduling",
                              "args": {"permitWaitingTimeSeconds": PERMIT_WAITING_TIME_SECONDS}}],
        }],
    }


def install_crds(cluster: LocalCluster, build: SchedulerPluginsBuild) -> list[str]:
    """Apply the module's CRDs and wait until they are Established; returns their names."""
    names = []
    for path in build.crds:
        crd = yaml.safe_load(path.read_text())
        cluster.rest.apply(CRD_PATH, crd)
        names.append(crd["metadata"]["name"])
    wait_for(lambda: all(condition(cluster.rest.get(f"{CRD_PATH}/{n}"), "Established") == "True" for n in names),
             START_TIMEOUT, 0.1, what=f"CRDs {', '.join(names)} Established")
    return names


class Coscheduling:
    """The Coscheduling scheduler and the PodGroup controller for one LocalCluster."""

    def __init__(self, cluster: LocalCluster, work_dir: Path, build: SchedulerPluginsBuild) -> None:
        self.cluster, self.build, self.dir = cluster, build, work_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.scheduler_port, self.metrics_port, self.probe_port = (processes.free_port() for _ in range(3))
        self.processes: list[processes.Process] = []

    def install_crds(self) -> list[str]:
        return install_crds(self.cluster, self.build)

    def scheduler_argv(self) -> list[str]:
        config = self.dir / "scheduler-config.yaml"
        config.write_text(yaml.safe_dump(scheduler_configuration(self.cluster.kubeconfig), sort_keys=False))
        return [str(self.build.scheduler), f"--config={config}", "--bind-address=127.0.0.1",
                f"--secure-port={self.scheduler_port}",
                f"--pod-max-in-unschedulable-pods-duration={UNSCHEDULABLE_RETRY}", "--v=2"]

    def controller_argv(self) -> list[str]:
        return [str(self.build.controller), f"--kubeconfig={self.cluster.kubeconfig}",
                f"--metricsAddr=127.0.0.1:{self.metrics_port}", f"--probeAddr=127.0.0.1:{self.probe_port}",
                "--qps=200", "--burst=400"]

    def start(self) -> None:
        for name, argv in (("scheduler-plugins-scheduler", self.scheduler_argv()),
                           ("scheduler-plugins-controller", self.controller_argv())):
            self.processes.append(processes.start(name, argv, self.dir / f"{name}.log", cwd=self.dir))

    def wait_ready(self) -> None:
        """Until the scheduler answers /healthz over TLS and the controller its probe."""
        scheduler, controller = self.processes
        processes.wait_healthy(scheduler, f"https://127.0.0.1:{self.scheduler_port}/healthz", START_TIMEOUT,
                               context=processes.insecure_context())
        processes.wait_healthy(controller, f"http://127.0.0.1:{self.probe_port}/healthz", START_TIMEOUT)

    def check_running(self) -> None:
        for proc in self.processes:
            proc.check_running()

    def stop(self) -> None:
        errors = []
        for proc in reversed(self.processes):
            try:
                proc.stop()
            except HarnessError as err:
                errors.append(str(err))
        self.processes = []
        if errors:
            raise HarnessError("; ".join(errors))
