"""The two operators under test, as processes against one local control plane: the upstream Go binary
(hack/devcluster/operators.py's GoOperator, built by hack/build/build-peer.sh) and ``python -m reconciler``.
Only one runs at a time."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from hack.devcluster import LocalCluster, operators
from hack.devcluster.operators import PEER_LOCK_NAMESPACE as LOCK_NAMESPACE
from hack.devcluster.operators import OperatorProcess
from hack.devcluster.processes import free_port
from reconciler.options import parse_options

RAISED = ("--kube-api-qps=1000", "--kube-api-burst=1000")


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


class GoOperator(operators.GoOperator):
    """The Go operator with the setting's flags, its log in ``go-<tag>/``."""

    kind = "go"

    def __init__(self, binary: Path, cluster: LocalCluster, work_dir: Path, setting: Setting, tag: str) -> None:
        log_dir = work_dir / f"go-{tag}"
        log_dir.mkdir(parents=True, exist_ok=True)
        super().__init__(binary, cluster, log_dir / "mpi-operator.log", setting.flags)


class OurOperator(OperatorProcess):
    """``python -m reconciler`` with its defaults (leader election on, its default client limits) plus the
    setting's flags; only the kubeconfig and free ports are added."""

    kind = "ours"

    def __init__(self, cluster: LocalCluster, work_dir: Path, setting: Setting, tag: str) -> None:
        log_dir = work_dir / f"ours-{tag}"
        log_dir.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "reconciler", f"--kubeConfig={cluster.kubeconfig}",
                f"--health-port={free_port()}", f"--lock-namespace={LOCK_NAMESPACE}", *setting.flags]
        super().__init__("reconciler (ours)", argv, log_dir / "reconciler.log")


Operator: TypeAlias = GoOperator | OurOperator

