"""Command lines of etcd, kube-apiserver, kube-controller-manager and kube-scheduler (control-plane.md 3.3).

All listen on 127.0.0.1 only, on ports chosen by the caller.
"""

from __future__ import annotations

import fcntl
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from .pki import Pki

SIOCGIFADDR = 0x8915
SERVICE_CIDR = "10.96.0.0/24"
FALLBACK_ADVERTISE = "192.0.2.1"  # TEST-NET-1: nothing connects to it (no kube-proxy, no pod network)


@dataclass(frozen=True)
class Ports:
    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int


def etcd_argv(binary: Path, data_dir: Path, ports: Ports) -> list[str]:
    client = f"http://127.0.0.1:{ports.etcd}"
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    return [str(binary), "--name=default", f"--data-dir={data_dir}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}", "--unsafe-no-fsync=true", "--log-level=warn"]


def has_default_route(route_table: Path = Path("/proc/net/route")) -> bool:
    """Whether the kernel routing table has a default (0.0.0.0/0) route, which the apiserver needs to
    derive its advertise address on its own."""
    try:
        lines = route_table.read_text().splitlines()[1:]
    except OSError:
        return False
    return any(len(f) > 7 and f[1] == "00000000" and f[7] == "00000000" for f in (ln.split() for ln in lines))


def _interface_ipv4(name: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def advertise_flags() -> list[str]:
    """Nothing when the host has a default route; otherwise an interface address (control-plane.md F16,
    section 6), or a TEST-NET address with the endpoint reconciler off if the host has only loopback."""
    if has_default_route():
        return []
    for _, name in socket.if_nameindex():
        addr = _interface_ipv4(name)
        if addr and not addr.startswith("127."):
            return [f"--advertise-address={addr}"]
    return [f"--advertise-address={FALLBACK_ADVERTISE}", "--endpoint-reconciler-type=none"]


# Native gang scheduling (Kubernetes 1.36 alpha): the Workload and PodGroup API (scheduling.k8s.io/v1alpha2,
# GenericWorkload) and kube-scheduler's GangScheduling plugin, in the API server, the controller manager (the
# PodGroup protection finalizer) and the scheduler, so that --gang-scheduling=kube-scheduler can be tried.
FEATURE_GATES = "--feature-gates=GenericWorkload=true,GangScheduling=true"
NATIVE_GANG_API = "--runtime-config=scheduling.k8s.io/v1alpha2=true"
# kube-controller-manager's client limits: the harness raises them so that the Job controller is not the bottleneck of
# a benchmark; KCM's own defaults (20 QPS, burst 30) are what a cluster has unless its admin raised them.
KCM_RAISED_LIMITS = (200.0, 400)
KCM_DEFAULT_LIMITS = (20.0, 30)


def feature_gates_flag(extra: tuple[str, ...] = ()) -> str:
    """The control plane's --feature-gates, plus ``extra`` gates (``Name=true``) for one cluster that opts in."""
    return ",".join([FEATURE_GATES, *extra])


def _flag_name(arg: str) -> str:
    return arg.split("=", 1)[0]


def apiserver_argv(binary: Path, pki: Pki, ports: Ports, extra: list[str], *,
                   feature_gates: str = FEATURE_GATES) -> list[str]:
    """envtest's flags plus an explicit serving pair; a flag in `extra` replaces the default of the same
    name (list flags such as --authorization-mode would otherwise accumulate), the rest comes last."""
    replaced = {_flag_name(a) for a in extra if a.startswith("--")}
    return [a for a in _default_apiserver_argv(binary, pki, ports, feature_gates)
            if _flag_name(a) not in replaced] + list(extra)


def _default_apiserver_argv(binary: Path, pki: Pki, ports: Ports, feature_gates: str = FEATURE_GATES) -> list[str]:
    return [str(binary), f"--etcd-servers=http://127.0.0.1:{ports.etcd}",
            "--bind-address=127.0.0.1", f"--secure-port={ports.apiserver}", f"--cert-dir={pki.dir}",
            f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--service-account-issuer=https://127.0.0.1:{ports.apiserver}/",
            f"--service-account-key-file={pki.sa_pub}", f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--authorization-mode=RBAC", "--allow-privileged=true",
            "--disable-admission-plugins=ServiceAccount", "--enable-priority-and-fairness=true",
            "--profiling=false", feature_gates, NATIVE_GANG_API, "--v=1", *advertise_flags()]


def controller_manager_argv(binary: Path, kubeconfig: Path, pki: Pki, ports: Ports, extra: list[str], *,
                            client_limits: tuple[float, int] = KCM_RAISED_LIMITS,
                            feature_gates: str = FEATURE_GATES) -> list[str]:
    """Every default controller (job, garbage collector, ttl-after-finished, node lifecycle, ...), with client
    limits (QPS, burst) high enough by default that the Job controller is not the bottleneck of a benchmark."""
    qps, burst = client_limits
    return [str(binary), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
            "--bind-address=127.0.0.1", f"--secure-port={ports.controller_manager}",
            "--controllers=*", "--node-monitor-period=5s", "--node-monitor-grace-period=40s",
            f"--kube-api-qps={qps:g}", f"--kube-api-burst={burst}",
            f"--root-ca-file={pki.ca_cert}", f"--service-account-private-key-file={pki.sa_key}",
            feature_gates, "--v=1", *extra]


SCHEDULER_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
  qps: 200
  burst: 400
leaderElection:
  leaderElect: false
"""


def scheduler_argv(binary: Path, config: Path, ports: Ports, extra: list[str], *,
                   feature_gates: str = FEATURE_GATES) -> list[str]:
    """The scheduler reads its client settings from a KubeSchedulerConfiguration file: its
    --kube-api-qps/--kube-api-burst flags are deprecated (and ignored once --config is given)."""
    return [str(binary), f"--config={config}", "--bind-address=127.0.0.1",
            f"--secure-port={ports.scheduler}", feature_gates, "--v=1", *extra]


def write_scheduler_config(path: Path, kubeconfig: Path) -> Path:
    path.write_text(SCHEDULER_CONFIG.format(kubeconfig=kubeconfig))
    return path
