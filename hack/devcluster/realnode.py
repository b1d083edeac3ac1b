"""A real node next to the local control plane: containerd, CoreDNS and a kubelet on a bridge.

    with RealNodeCluster(crds=[CRD], images=image_archives()) as cluster:
        cluster.kubectl("run", "x", "--image=mpioperator/mpi-pi:openmpi", ...)

The facts it relies on (and the pitfalls it avoids) are in the shared spec `real-node.md`. In short:
- one bridge (`mpijob0`, 10.245.0.1/24) whose address is the node IP, the kubelet's address, the cluster
  DNS address (CoreDNS as a host process) and the API server's advertised address;
- the API server listens on every address, its `kubernetes` Service endpoint is the bridge address, and
  an iptables DNAT rule in our own chain stands in for kube-proxy for that one ClusterIP, so pods reach
  it with their ServiceAccount tokens (the ServiceAccount admission plugin is on in this cluster);
- containerd (Debian's 1.6) with its own config, socket and state under the work dir and its content
  store (the imported images) under ~/.cache/mpijob-operator/containerd, so that images survive;
- kwok manages only the fake nodes (its annotation selector), never the real node.

`stop()` stops the kubelet, removes every container and sandbox, stops containerd (and its shims),
CoreDNS, the control plane; then unmounts what is left under the node's directories, removes the
network namespaces, the bridge, the iptables chain and the kubepods cgroups.
Linux and root only: `unavailable()` says why not, for callers that fall back to kwok alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import processes
from .binaries import REPO_ROOT
from .cluster import LocalCluster
from .components import SERVICE_CIDR
from .nodes import NodePool
from .pki import issue
from .rest import ApiError, condition
from .wait import HarnessError, wait_for

NODE_BUILD_SCRIPT = REPO_ROOT / "hack" / "build" / "build-node.sh"
IMAGES_BUILD_SCRIPT = REPO_ROOT / "hack" / "build" / "build-images.sh"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mpijob-operator"
CONTAINERD_ROOT = CACHE / "containerd"  # images survive between clusters
NODE_NAME = "real-node"
BRIDGE = "mpijob0"
NODE_IP = "10.245.0.1"
POD_SUBNET = "10.245.0.0/24"
SERVICE_IP = SERVICE_CIDR.rsplit(".", 1)[0] + ".1"  # the `kubernetes` Service's ClusterIP
NAT_CHAIN = "MPIJOB-REALNODE"
CLUSTER_DOMAIN = "cluster.local"
SANDBOX_IMAGE = "registry.k8s.io/pause:3.10"
K8S_NAMESPACE = "k8s.io"  # containerd namespace the kubelet (CRI) sees
REAL_NODE_LABEL = "mpijob.kubeflow.org/real-node"
OWNER_FILE = CACHE / "realnode-owner.json"  # which work dir holds the machine's one real node
LOCK_FILE = CACHE / "realnode.lock"  # held while a run uses the real node; the OS drops a killed run's lock
LOCK_WAIT = float(os.environ.get("MPIJOB_REALNODE_WAIT", "3600"))  # seconds a second run waits for the first
ALL_IMAGES = ("pause", "openmpi", "openmpi4", "mpich", "intel", "prometheus")
ARCHIVE_PREFIXES = {"pause": "pause-", "prometheus": "prometheus-",  # the others: mpi-pi-<name>-
                    "pytorch": "mpi-pytorch-openmpi-"}  # built on demand only, not in ALL_IMAGES


def unavailable() -> str | None:
    """Why a real node cannot run here, or None when it can."""
    if sys.platform != "linux":
        return f"a real node needs Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return "a real node needs root (mounts, a bridge, cgroups)"
    for tool in ("containerd", "ctr", "runc", "ip", "iptables", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (hack/build/build-node.sh installs the Debian packages)"
    return None


def _run_build(script: Path, *args: str) -> Path:
    proc = subprocess.run(["bash", str(script), *args], stdout=subprocess.PIPE, stderr=None, text=True,
                          cwd=REPO_ROOT, check=False)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise HarnessError(f"{script.name} failed with status {proc.returncode} (see its output above)")
    return Path(lines[-1])


def node_bin_dir() -> Path:
    """kubelet and coredns, built (once, cached) by hack/build/build-node.sh."""
    return _run_build(NODE_BUILD_SCRIPT)


def image_archives(names: Sequence[str] = ALL_IMAGES) -> list[Path]:
    """The docker-archives of the named images (pause, openmpi, openmpi4, mpich, intel, prometheus: Debian
    trixie's, for tests/e2e/test_monitoring.py), built once by hack/build/build-images.sh and cached."""
    out = _run_build(IMAGES_BUILD_SCRIPT, *names)
    found = []
    for name in names:
        prefix = ARCHIVE_PREFIXES.get(name, f"mpi-pi-{name}-")
        archive = re.compile(re.escape(prefix) + r"[0-9a-f]{12}\.tar")  # mpi-pi-openmpi-*, not openmpi4-*
        candidates = sorted((p for p in out.glob(f"{prefix}*.tar") if archive.fullmatch(p.name)),
                            key=lambda p: p.stat().st_mtime)
        if not candidates:
            raise HarnessError(f"{IMAGES_BUILD_SCRIPT.name} left no {prefix}*.tar in {out}")
        found.append(candidates[-1])
    return found


def _sh(*argv: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, input=input, timeout=120)


# ---- host network: the bridge and the DNAT rule for the `kubernetes` Service
def setup_network(apiserver_port: int) -> None:
    _sh("sysctl", "-qw", "net.ipv4.ip_forward=1")
    if _sh("ip", "link", "show", BRIDGE, check=False).returncode != 0:
        _sh("ip", "link", "add", BRIDGE, "type", "bridge")
    _sh("ip", "addr", "replace", f"{NODE_IP}/24", "dev", BRIDGE)
    _sh("ip", "link", "set", BRIDGE, "up")
    _sh("iptables", "-t", "nat", "-N", NAT_CHAIN, check=False)
    _sh("iptables", "-t", "nat", "-F", NAT_CHAIN)
    _sh("iptables", "-t", "nat", "-A", NAT_CHAIN, "-d", SERVICE_IP, "-p", "tcp", "--dport", "443",
        "-j", "DNAT", "--to-destination", f"{NODE_IP}:{apiserver_port}")
    for hook in ("PREROUTING", "OUTPUT"):
        if _sh("iptables", "-t", "nat", "-C", hook, "-j", NAT_CHAIN, check=False).returncode != 0:
            _sh("iptables", "-t", "nat", "-I", hook, "-j", NAT_CHAIN)


def teardown_network() -> None:
    for hook in ("PREROUTING", "OUTPUT"):
        while _sh("iptables", "-t", "nat", "-D", hook, "-j", NAT_CHAIN, check=False).returncode == 0:
            pass
    _sh("iptables", "-t", "nat", "-F", NAT_CHAIN, check=False)
    _sh("iptables", "-t", "nat", "-X", NAT_CHAIN, check=False)
    _sh("ip", "link", "delete", BRIDGE, check=False)


# ---- mounts, network namespaces and cgroups left behind
def mounts_under(*dirs: Path) -> list[str]:
    """Mount points at or below any of `dirs`, deepest first."""
    prefixes = [str(d.resolve()) for d in dirs]
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == p or point.startswith(p + "/") for p in prefixes):
            points.append(point)
    return sorted(set(points), key=lambda p: p.count("/"), reverse=True)


def unmount_under(*dirs: Path) -> None:
    for point in mounts_under(*dirs):
        if _sh("umount", point, check=False).returncode != 0:
            _sh("umount", "-l", point, check=False)


def remove_kubepods_cgroups(root: Path = Path("/sys/fs/cgroup")) -> None:
    """rmdir the (empty, once every container is gone) cgroups the kubelet made, deepest first."""
    tops = [*root.glob("*/kubepods*"), *root.glob("kubepods*")]
    for top in tops:
        if not top.is_dir():
            continue
        for dirpath, _, _ in sorted(os.walk(top), key=lambda w: w[0].count("/"), reverse=True):
            with contextlib.suppress(OSError):
                os.rmdir(dirpath)


@dataclass(frozen=True)
class NodePaths:
    """Everything of the node under the cluster's work dir (`dir`), plus containerd's persistent root."""

    dir: Path

    @property
    def containerd_state(self) -> Path:
        return self.dir / "containerd-state"

    @property
    def socket(self) -> Path:
        return self.dir / "containerd.sock"

    @property
    def kubelet_root(self) -> Path:
        return self.dir / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.dir / "pod-logs"

    @property
    def cni_conf(self) -> Path:
        return self.dir / "cni"

    @property
    def cni_state(self) -> Path:
        return self.dir / "cni-ipam"

    @property
    def registry_hosts(self) -> Path:
        """containerd's registry host configurations: `<host[:port]>/hosts.toml` (read at each pull)."""
        return self.dir / "certs.d"


CONTAINERD_CONFIG = """\
version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{root}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  restrict_oom_score_adj = true
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni_conf}"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{registry_hosts}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
"""

KUBELET_CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
localStorageCapacityIsolation: false
containerRuntimeEndpoint: unix://{socket}
clusterDNS: [{node_ip}]
clusterDomain: {cluster_domain}
address: {node_ip}
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz_port}
podLogsDir: {pod_logs}
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {ca}}}
authorization:
  mode: Webhook
evictionHard: {{memory.available: 50Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
# Images present are used as they are. The default (NeverVerifyPreloadedImages, kubelet 1.33+) re-verifies an
# imported image once the kubelet has pulled the same image ID under another name: after tests/e2e/test_registry.py
# pulled the operator from its registry, `mpijob-operator/*:dev` (imported, same ID) would be pulled from docker.io
imagePullCredentialsVerificationPolicy: NeverVerify
maxPods: 40
syncFrequency: 10s  # ConfigMap volumes (discover_hosts.sh) follow within seconds, not a minute
"""

COREFILE = """\
.:53 {{
    bind {node_ip}
    errors
    kubernetes {domains} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 2
    }}
    forward . /etc/resolv.conf
}}
"""
# a domain this cluster does not use: no such name, at once (the machine's resolver may not answer at all)
NXDOMAIN_ZONE = """\
{zone}:53 {{
    bind {node_ip}
    template ANY ANY {{
        rcode NXDOMAIN
    }}
}}
"""


def corefile(domains: Sequence[str], kubeconfig: Path, unserved: Sequence[str] = ()) -> str:
    """CoreDNS's configuration: the cluster's names under each of `domains` (the first is the cluster's own:
    reverse lookups answer with it), NXDOMAIN for the `unserved` zones, the rest forwarded."""
    text = COREFILE.format(node_ip=NODE_IP, domains=" ".join(domains), kubeconfig=kubeconfig)
    return text + "".join(NXDOMAIN_ZONE.format(zone=z, node_ip=NODE_IP) for z in unserved if z not in domains)


def cni_config(paths: NodePaths) -> dict[str, Any]:
    return {"cniVersion": "1.0.0", "name": "mpijob", "plugins": [
        {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False, "hairpinMode": True,
         "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP}]],
                  "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(paths.cni_state)}},
        {"type": "portmap", "capabilities": {"portMappings": True}}]}


class RealNodeCluster(LocalCluster):
    """LocalCluster plus one real node (`real-node`). Fake kwok nodes are off unless asked for."""

    def __init__(self, work_dir: Path | None = None, *, nodes: int | NodePool = 0,
                 images: Sequence[Path] = (), node_bin_dir: Path | None = None,
                 cluster_domains: Sequence[str] = (CLUSTER_DOMAIN,), **kwargs: Any) -> None:
        self.images = [Path(i) for i in images]
        self._node_bin = node_bin_dir
        self.cluster_domains = list(cluster_domains)
        self.node_processes: list[processes.Process] = []
        self.node_timings: dict[str, float] = {}
        self._owns_node = False
        self._lock_fd: int | None = None
        flags = list(kwargs.pop("apiserver_flags", ()))
        super().__init__(work_dir, nodes=nodes, apiserver_flags=flags, **kwargs)

    @property
    def node_paths(self) -> NodePaths:
        return NodePaths(self.work_dir / "node")

    def serving_sans(self) -> tuple[str, ...]:
        return (NODE_IP, SERVICE_IP, "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                f"kubernetes.default.svc.{CLUSTER_DOMAIN}")

    def _start_all(self, bin_dir: Path) -> None:
        reason = unavailable()
        if reason:
            raise HarnessError(reason)
        node_bin = self._node_bin or node_bin_dir()
        self._take_machine_lock()
        self._cleanup_stale()
        self.extra["apiserver"] = [
            "--bind-address=0.0.0.0", f"--advertise-address={NODE_IP}", "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction", "--disable-admission-plugins=",
            "--enable-aggregator-routing=true", "--kubelet-preferred-address-types=InternalIP",
            *self._kubelet_client_flags(), *self.extra["apiserver"]]
        super()._start_all(bin_dir)
        assert self.ports is not None
        self._timed_node("network", lambda: setup_network(self.ports.apiserver if self.ports else 0))
        self._timed_node("containerd", self._start_containerd)
        self._timed_node("images", self._import_images)
        self._timed_node("coredns", lambda: self._start_coredns(node_bin))
        self._timed_node("kubelet", lambda: self._start_kubelet(node_bin))

    def _timed_node(self, what: str, step: Any) -> None:
        began = time.monotonic()
        step()
        self.node_timings[what] = self.timings[f"node:{what}"] = time.monotonic() - began
        self._log(f"real node: {what} ready ({self.node_timings[what]:.1f}s)")

    def _kubelet_client_flags(self) -> list[str]:
        pki_dir = self.work_dir / "pki"
        return [f"--kubelet-client-certificate={pki_dir / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={pki_dir / 'apiserver-kubelet-client.key'}"]

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> processes.Process:
        if name == "kube-apiserver":  # its client certificate for the kubelets, before it starts
            issue(self.pki, self.pki.dir / "apiserver-kubelet-client.crt",
                  self.pki.dir / "apiserver-kubelet-client.key", "kube-apiserver-kubelet-client",
                  organizations=("system:masters",))
        return super()._spawn(name, argv, env)

    def _spawn_node(self, name: str, argv: list[str]) -> processes.Process:
        proc = self._spawn(name, argv)
        self.node_processes.append(proc)
        return proc

    # ---- containerd
    def _ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return ctr(self.node_paths.socket, *args, check=check)

    def _start_containerd(self) -> None:
        paths = self.node_paths
        for d in (paths.dir, paths.containerd_state, paths.cni_conf, paths.cni_state, paths.registry_hosts,
                  CONTAINERD_ROOT):
            d.mkdir(parents=True, exist_ok=True)
        (paths.cni_conf / "10-mpijob.conflist").write_text(json.dumps(cni_config(paths), indent=2))
        config = paths.dir / "containerd.toml"
        config.write_text(CONTAINERD_CONFIG.format(root=CONTAINERD_ROOT, state=paths.containerd_state,
                                                   socket=paths.socket, sandbox_image=SANDBOX_IMAGE,
                                                   cni_conf=paths.cni_conf, registry_hosts=paths.registry_hosts))
        proc = self._spawn_node("containerd", ["containerd", f"--config={config}"])

        def up() -> bool:
            proc.check_running()
            return paths.socket.exists() and _sh("ctr", f"--address={paths.socket}", "version",
                                                 check=False).returncode == 0

        wait_for(up, self.start_timeout, 0.1, what="containerd")
        self._remove_containers()  # left by an earlier run that was killed (the root is persistent)

    def _import_images(self) -> None:
        """Import each archive unless this persistent root already holds it (archive names carry the
        hash of their inputs; IMPORTED records which ones were imported)."""
        record = CONTAINERD_ROOT / "imported.json"
        try:
            done: dict[str, list[str]] = json.loads(record.read_text())
        except (OSError, json.JSONDecodeError):
            done = {}
        present = set(self._ctr("images", "ls", "-q").stdout.split())
        for archive in self.images:
            refs = done.get(archive.name)
            if refs and all(r in present for r in refs):
                continue
            began = time.monotonic()
            self._ctr("images", "import", str(archive))
            tags = [t for m in json.loads(_read_member(archive, "manifest.json")) for t in m["RepoTags"]]
            done[archive.name] = [t if "." in t.split("/")[0] else f"docker.io/{t}" for t in tags]
            record.write_text(json.dumps(done, indent=2))
            self._log(f"imported {archive.name} in {time.monotonic() - began:.1f}s")

    def import_images(self, archives: Sequence[Path]) -> None:
        """Import more archives into the running node (an image built on demand by one test module), as the
        start imports `images`: each once per persistent root."""
        self.images.extend(a for a in archives if a not in self.images)
        self._import_images()

    def _remove_containers(self) -> None:
        remove_containers(self.node_paths.socket)

    def forget_images(self, prefix: str) -> None:
        """Remove every image name in containerd that starts with `prefix` (the content goes with its last
        name). containerd's root outlives clusters and image builds are reproducible, so a name pulled from an
        earlier run's registry keeps a digest that a new push repeats, and kubelet would report that older
        name as the imageID."""
        names = [n for n in self._ctr("images", "ls", "-q").stdout.split() if n.startswith(prefix)]
        if names:
            self._ctr("images", "rm", *names)

    @contextlib.contextmanager
    def registry_configured(self, host: str, *, plain_http: bool = False, ca: Path | None = None) -> Iterator[Path]:
        """containerd told how to reach the registry `host` (host[:port]), as an admin configures each node:
        `certs.d/<host>/hosts.toml` under the CRI plugin's `config_path`, over plain HTTP or HTTPS trusting
        `ca`; read at each pull, so no restart. Removed afterwards. Yields the file."""
        scheme = "http" if plain_http else "https"
        lines = [f'server = "{scheme}://{host}"', "", f'[host."{scheme}://{host}"]',
                 '  capabilities = ["pull", "resolve"]']
        if ca is not None:
            lines.append(f'  ca = "{ca}"')
        directory = self.node_paths.registry_hosts / host
        directory.mkdir(parents=True, exist_ok=True)
        hosts = directory / "hosts.toml"
        hosts.write_text("\n".join(lines) + "\n")
        try:
            yield hosts
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    # ---- CoreDNS and the kubelet
    def _start_coredns(self, node_bin: Path, unserved: Sequence[str] = ()) -> None:
        path = self.node_paths.dir / "Corefile"
        path.write_text(corefile(self.cluster_domains, self.kubeconfig, unserved))
        proc = self._spawn_node("coredns", [str(node_bin / "coredns"), "-conf", str(path)])

        def answers() -> bool:
            proc.check_running()
            return all(dns_query(NODE_IP, f"kubernetes.default.svc.{d}") == [SERVICE_IP] for d in self.cluster_domains)

        wait_for(answers, self.start_timeout, 0.2, what="CoreDNS answering on the bridge")

    @contextlib.contextmanager
    def custom_cluster_domain(self, domain: str) -> Iterator[None]:
        """The node as in a cluster whose DNS domain is `domain`, not cluster.local: the kubelet restarted with
        `clusterDomain: domain` (the pods' search path and the names in their /etc/hosts) and CoreDNS restarted
        serving the cluster's names under `domain` alone (`cluster.local` names do not exist, as in such a
        cluster). Running pods keep running; those Ready before are Ready again before this returns. Both are
        restored afterwards, however the block ends."""
        before = self.cluster_domains
        self._switch_cluster_domains([domain], unserved=[CLUSTER_DOMAIN])
        try:
            yield
        finally:
            self._switch_cluster_domains(before)

    def _switch_cluster_domains(self, domains: Sequence[str], unserved: Sequence[str] = ()) -> None:
        node_bin = self._node_bin or node_bin_dir()
        ready = self._pods()[1]
        self.cluster_domains = list(domains)
        self._stop_node_process("coredns")
        self._start_coredns(node_bin, unserved)
        self._stop_node_process("kubelet")
        self._start_kubelet(node_bin)

        def ready_again() -> bool:  # those still there: a test's namespace may be going away meanwhile
            live, now_ready = self._pods()
            return ready & live <= now_ready

        wait_for(ready_again, self.start_timeout, 0.2,
                 what=f"the pods Ready before the switch to {', '.join(domains)} Ready again")

    def _stop_node_process(self, name: str) -> None:
        for proc in [p for p in self.node_processes if p.name == name]:
            proc.stop()
            self.node_processes.remove(proc)
            self.processes.remove(proc)

    def _pods(self) -> tuple[set[str], set[str]]:
        """The real node's pods not being deleted, and those of them Ready (namespace/name)."""
        pods = self.rest.get(f"/api/v1/pods?fieldSelector=spec.nodeName={NODE_NAME}")["items"]
        live = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods
                if not p["metadata"].get("deletionTimestamp")}
        return set(live), {name for name, p in live.items() if condition(p, "Ready") == "True"}

    def _start_kubelet(self, node_bin: Path) -> None:
        paths, pki = self.node_paths, self.pki
        for d in (paths.kubelet_root, paths.pod_logs):
            d.mkdir(parents=True, exist_ok=True)
        issue(pki, pki.dir / "kubelet.crt", pki.dir / "kubelet.key", f"system:node:{NODE_NAME}",
              organizations=("system:nodes",))
        kubeconfig = paths.dir / "kubelet.kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "local", "cluster": {"server": self.server,
                                                       "certificate-authority": str(pki.ca_cert)}}],
            "users": [{"name": "kubelet", "user": {"client-certificate": str(pki.dir / "kubelet.crt"),
                                                   "client-key": str(pki.dir / "kubelet.key")}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "kubelet"}}],
            "current-context": "local"}))
        config = paths.dir / "kubelet.yaml"
        healthz = processes.free_port()
        config.write_text(KUBELET_CONFIG.format(
            socket=paths.socket, node_ip=NODE_IP, cluster_domain=self.cluster_domains[0],
            port=processes.free_port(), healthz_port=healthz, pod_logs=paths.pod_logs, ca=pki.ca_cert))
        _sh("mount", "--make-rshared", "/")
        began = time.monotonic()
        proc = self._spawn_node("kubelet", [
            str(node_bin / "kubelet"), f"--config={config}", f"--kubeconfig={kubeconfig}",
            f"--root-dir={paths.kubelet_root}", f"--hostname-override={NODE_NAME}", f"--node-ip={NODE_IP}",
            f"--node-labels={REAL_NODE_LABEL}=true", "--v=1"])

        def ready() -> bool:
            proc.check_running()
            try:
                node = self.rest.get(f"/api/v1/nodes/{NODE_NAME}")
            except ApiError:
                return False
            taints = node.get("spec", {}).get("taints") or []
            return condition(node, "Ready") == "True" and not any(
                t.get("key") == "node.kubernetes.io/not-ready" for t in taints)

        def serving() -> bool:  # this kubelet, not a predecessor's Ready condition (custom_cluster_domain)
            proc.check_running()
            with contextlib.suppress(OSError):
                return processes.http_get(f"http://127.0.0.1:{healthz}/healthz", timeout=1.0)[0] == 200
            return False

        wait_for(serving, self.start_timeout, 0.1, what="the kubelet's /healthz")
        wait_for(ready, self.start_timeout, 0.1, what=f"node {NODE_NAME} Ready")
        self.node_timings["node-ready-after-kubelet-start"] = time.monotonic() - began

    # ---- stop
    def stop(self) -> None:
        errors = []
        if self._work_dir is not None:
            try:
                self._stop_node()
            except (HarnessError, OSError, subprocess.SubprocessError) as err:
                errors.append(str(err))
        try:
            super().stop()
        finally:
            if errors:
                raise HarnessError("; ".join(errors))

    def _stop_node(self) -> None:
        try:
            self._stop_owned_node()
        finally:
            self._release_machine_lock()

    def _stop_owned_node(self) -> None:
        if not self._owns_node:  # it never got as far as taking the node (or refused to)
            return
        self._owns_node = False
        by_name = {p.name: p for p in self.node_processes}
        if "kubelet" in by_name:
            by_name["kubelet"].stop()
        if "containerd" in by_name and by_name["containerd"].running():
            self._remove_containers()
        for name in ("containerd", "coredns"):
            if name in by_name:
                by_name[name].stop()
        self.processes = [p for p in self.processes if p not in self.node_processes]
        self.node_processes = []
        kill_shims(self.node_paths.socket)
        unmount_under(self.node_paths.dir, CONTAINERD_ROOT)
        teardown_network()
        remove_kubepods_cgroups()
        shutil.rmtree(self.node_paths.dir, ignore_errors=True)
        if _owner_dir() == self.work_dir:
            OWNER_FILE.unlink(missing_ok=True)

    def _take_machine_lock(self) -> None:
        """One real node per machine: a second run (another pytest, a demo) waits here until the first stops
        its node, instead of failing on the fixed bridge."""
        LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + LOCK_WAIT
        waiting = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise HarnessError(f"the real node stayed busy for {LOCK_WAIT:.0f}s (another run holds "
                                       f"{LOCK_FILE})") from None
                if not waiting:
                    print(f"[harness] the real node is in use by another run; waiting (up to {LOCK_WAIT:.0f}s)",
                          file=sys.stderr, flush=True)
                    waiting = True
                time.sleep(2)
        self._lock_fd = fd

    def _release_machine_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = None

    def _cleanup_stale(self) -> None:
        """Refuse to start next to a live real node (one per machine: the bridge is fixed); otherwise a
        killed run may have left the bridge, the NAT chain, mounts and cgroups: remove them."""
        from .workdir import read_state  # noqa: PLC0415

        other = _owner_dir()
        if other is not None and other != self.work_dir:
            state = read_state(other) or {}
            if any(processes.is_running(processes.ProcessRecord.from_json(r)) for r in state.get("processes", [])):
                raise HarnessError(f"a real node is already running from {other} (one per machine; "
                                   "`make e2e-down` stops the one `make e2e-up` started)")
        OWNER_FILE.parent.mkdir(parents=True, exist_ok=True)
        OWNER_FILE.write_text(json.dumps({"work_dir": str(self.work_dir)}))
        self._owns_node = True
        teardown_network()
        unmount_under(CONTAINERD_ROOT)
        remove_kubepods_cgroups()

    # ---- helpers for tests
    def pod_logs(self, namespace: str, pod: str, container: str | None = None) -> str:
        args = ["logs", "-n", namespace, pod] + ([f"-c={container}"] if container else [])
        return self.kubectl(*args).stdout

    def rss_bytes(self) -> dict[str, int]:
        rss = super().rss_bytes()
        shims = [pid for pid in _pids() if _is_our_shim(pid, self.node_paths.socket)]
        rss["containerd-shims"] = sum(processes.rss_of(pid) for pid in shims)
        return rss


def _owner_dir() -> Path | None:
    """The work dir of the cluster that last took the machine's real node, if recorded."""
    try:
        return Path(json.loads(OWNER_FILE.read_text())["work_dir"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _read_member(archive: Path, name: str) -> str:
    import tarfile  # noqa: PLC0415

    with tarfile.open(archive) as tar:
        member = tar.extractfile(name)
        if member is None:
            raise HarnessError(f"{archive} has no {name}")
        return member.read().decode()


def _archive_config_id(archive: Path) -> str:
    return str(json.loads(_read_member(archive, "manifest.json"))[0]["Config"]).removesuffix(".json")


def _image_ids(listing: set[str]) -> set[str]:
    return {w.removeprefix("sha256:") for w in listing if w.startswith("sha256:")}


def dns_query(server: str, name: str, timeout: float = 1.0) -> list[str] | None:
    """The A records of `name` from the DNS server at `server`:53 (None if it does not answer)."""
    query = struct.pack(">HHHHHH", 0x4D50, 0x0100, 1, 0, 0, 0)
    query += b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"
    query += struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.sendto(query, (server, 53))
            reply = sock.recv(4096)
        except OSError:
            return None
    answers = struct.unpack(">H", reply[6:8])[0]
    pos = len(query)
    found = []
    for _ in range(answers):
        pos += 2 if reply[pos] & 0xC0 == 0xC0 else reply.index(b"\0", pos) + 1 - pos
        rtype, _, _, length = struct.unpack(">HHIH", reply[pos:pos + 10])
        pos += 10
        if rtype == 1 and length == 4:
            found.append(socket.inet_ntoa(reply[pos:pos + 4]))
        pos += length
    return found


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _is_our_shim(pid: int, socket: Path) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(argv) and argv[0].endswith(b"containerd-shim-runc-v2") and str(socket).encode() in argv


def kill_shims(socket: Path) -> None:
    """SIGKILL the runc shims that served our containerd (their command line names its socket)."""
    for pid in _pids():
        if _is_our_shim(pid, socket):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)


def ctr(socket: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _sh("ctr", f"--address={socket}", "-n", K8S_NAMESPACE, *args, check=check)


def remove_containers(socket: Path) -> None:
    """Kill and remove every task and container in containerd's k8s.io namespace (all ours: the root is
    this harness's own), and the network namespaces of their sandboxes."""
    netns = set()
    for cid in ctr(socket, "containers", "ls", "-q", check=False).stdout.split():
        info = ctr(socket, "containers", "info", cid, check=False).stdout
        with contextlib.suppress(json.JSONDecodeError, KeyError, TypeError):
            for ns in json.loads(info)["Spec"]["linux"]["namespaces"]:
                if ns.get("type") == "network" and ns.get("path"):
                    netns.add(ns["path"])
        ctr(socket, "tasks", "kill", "-s", "SIGKILL", cid, check=False)
    deadline = time.monotonic() + 10
    for cid in ctr(socket, "containers", "ls", "-q", check=False).stdout.split():
        while ctr(socket, "tasks", "delete", "-f", cid, check=False).returncode != 0 and time.monotonic() < deadline:
            if "not found" in ctr(socket, "tasks", "ps", cid, check=False).stderr:
                break
            time.sleep(0.2)
        ctr(socket, "containers", "delete", cid, check=False)
    for path in netns:
        _sh("umount", path, check=False)
        with contextlib.suppress(OSError):
            os.unlink(path)


# ---- command line: `make e2e-up` / `make e2e-down`
def _up(work_dir: Path) -> int:
    from .operator_deploy import deploy, operator_image_archives  # noqa: PLC0415
    from .workdir import read_state, write_state  # noqa: PLC0415

    state = read_state(work_dir)
    if state and any(processes.is_running(r) for r in (processes.ProcessRecord.from_json(x)
                                                         for x in state.get("processes", []))):
        print(f"already running ({work_dir}); `make e2e-down` first", file=sys.stderr)
        return 1
    crd = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
    cluster = RealNodeCluster(work_dir, images=image_archives() + operator_image_archives(), crds=[crd],
                              detach=True, keep_logs=work_dir / "logs")
    cluster.start()
    try:
        timings = deploy(cluster, work_dir / "operator")
    except BaseException:
        cluster.stop()
        raise
    state = cluster.state()
    state["real_node"] = {"dir": str(cluster.node_paths.dir), "socket": str(cluster.node_paths.socket)}
    write_state(work_dir, state)
    print(f"control plane and real node up in {cluster.timings['total']:.1f}s; operator deployed from its images "
          f"(kubectl apply -k: webhook called after {timings['webhook-called']:.1f}s, reconciler leader after "
          f"{timings['reconciler-leader']:.1f}s)")
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    return 0


def _down(work_dir: Path) -> int:
    from .workdir import read_state, remove_runtime_data  # noqa: PLC0415

    state = read_state(work_dir) or {}
    node = state.get("real_node", {})
    stopped = 0
    for record in reversed([processes.ProcessRecord.from_json(r) for r in state.get("processes", [])]):
        if record.name == "containerd" and node and processes.is_running(record):
            remove_containers(Path(node["socket"]))
        if processes.is_running(record):
            processes.Process(record).stop()
            stopped += 1
    if node:
        kill_shims(Path(node["socket"]))
        unmount_under(Path(node["dir"]), CONTAINERD_ROOT)
        shutil.rmtree(node["dir"], ignore_errors=True)
    teardown_network()
    remove_kubepods_cgroups()
    if _owner_dir() == work_dir:
        OWNER_FILE.unlink(missing_ok=True)
    if work_dir.is_dir():
        shutil.rmtree(work_dir / "operator", ignore_errors=True)
        remove_runtime_data(work_dir, owned=False, keep_logs=work_dir / "logs")
    print(f"stopped {stopped} processes; removed the node's mounts, bridge and state")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="python -m hack.devcluster.realnode",
                                     description="a local control plane plus a real node, in the background")
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument("--dir", default=".cluster")
    args = parser.parse_args(argv)
    work_dir = Path(args.dir).resolve()
    return _up(work_dir) if args.command == "up" else _down(work_dir)


if __name__ == "__main__":
    raise SystemExit(main())
