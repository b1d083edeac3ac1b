"""The two operators under test, as processes against one local control plane: the upstream Go binary
(built by hack/build/build-peer.sh) and ``python -m reconciler``. Only one runs at a time."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from hack.devcluster import LocalCluster
from hack.devcluster.operators import REPO_ROOT, _Process, free_port
from reconciler.options import parse_options

LOCK_NAMESPACE = "mpi-operator"
RAISED = ("--kube-api-qps=1000", "--kube-api-burst=1000")
GO_HEALTH_PORT = 8080  # hard-coded in v0.8.2 (cmd/mpi-operator/app/server.go), on every interface


@dataclass(frozen=True)
class Setting:
    name: str  # "defaults" or "raised"
    flags: tuple[str, ...]

    @property
    def label(self) -> str:
        return "defaults" if not self.flags else " ".join(self.flags)


DEFAULTS = Setting("defaults", ())
RAISED_LIMITS = Setting("raised", RAISED)
SETTINGS = {s.name: s for s in (DEFAULTS, RAISED_LIMITS)}


def our_default_limits() -> tuple[float, int]:
    """``python -m reconciler``'s client QPS and burst when no flag is given, read from reconciler/options.py
    at run time (0 QPS: no client-side limit)."""
    defaults = parse_options([])
    return float(defaults.kube_api_qps), int(defaults.kube_api_burst)


def build_peer(version: str) -> Path:
    """hack/build/build-peer.sh: the Go operator's binary in the cache (built once per version)."""
    script = REPO_ROOT / "hack" / "build" / "build-peer.sh"
    result = subprocess.run(["bash", str(script)], env={**os.environ, "PEER_VERSION": version}, capture_output=True,
                            text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"hack/build/build-peer.sh failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return Path(result.stdout.strip().splitlines()[-1])


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))  # the Go operator binds every interface
        except OSError:
            return False
        return True


class Operator(_Process):
    """One operator process; ``kind`` is ``go`` or ``ours``."""

    kind = ""

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid


class GoOperator(Operator):
    """github.com/kubeflow/mpi-operator's ``mpi-operator``, cluster-wide, leader election on (its only mode)."""

    kind = "go"

    def __init__(self, binary: Path, cluster: LocalCluster, work_dir: Path, setting: Setting, tag: str) -> None:
        log_dir = work_dir / f"go-{tag}"
        log_dir.mkdir(parents=True, exist_ok=True)
        argv = [str(binary), f"-kubeConfig={cluster.kubeconfig}", f"-lock-namespace={LOCK_NAMESPACE}",
                *setting.flags]  # Go's flag package takes --x=1 as -x=1
        super().__init__("mpi-operator (Go)", argv, log_dir / "mpi-operator.log")

    def start(self) -> None:
        if not port_free(GO_HEALTH_PORT):
            raise RuntimeError(f"port {GO_HEALTH_PORT} is in use: the Go mpi-operator v0.8.2 always serves /healthz "
                               "there and exits when it cannot")
        super().start()


class OurOperator(Operator):
    """``python -m reconciler`` with its defaults (leader election on, its default client limits) plus the
    setting's flags; only the kubeconfig and free ports are added."""

    kind = "ours"

    def __init__(self, cluster: LocalCluster, work_dir: Path, setting: Setting, tag: str) -> None:
        log_dir = work_dir / f"ours-{tag}"
        log_dir.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "reconciler", f"--kubeConfig={cluster.kubeconfig}",
                f"--health-port={free_port()}", f"--lock-namespace={LOCK_NAMESPACE}", *setting.flags]
        super().__init__("reconciler (ours)", argv, log_dir / "reconciler.log")
