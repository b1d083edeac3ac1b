"""LocalCluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on loopback.

    with LocalCluster(nodes=3, gpus_per_node=8, gpu_nodes=1, crds=[CRD]) as cluster:
        cluster.kubectl("get", "nodes", check=True)

Start order: etcd, apiserver, CRDs (Established before the controller manager starts, so that its
garbage collector knows them from the first sync), controller manager, scheduler, kwok, nodes.
Stop order is the reverse. Everything lives in one work directory, removed on stop.
"""

from __future__ import annotations

import atexit
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from . import components, kwok, processes
from .binaries import find_bin_dir
from .kubeconfig import write_kubeconfig
from .nodes import NodePool, create_nodes, unready_nodes
from .pki import Pki, create_pki
from .rest import RestClient, client_context, condition
from .wait import HarnessError, wait_for
from .workdir import TEMP_PREFIX, owner_record, remove_runtime_data, sweep_stale_temp_dirs, write_state

START_TIMEOUT = 90.0  # per component; the apiserver needs 5-15 s on 2 cores
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class KubectlError(subprocess.CalledProcessError):
    """A kubectl that failed, shown with what it printed on stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nkubectl said: {(self.stderr or '').strip()}"


class LocalCluster:
    """A real control plane with fake (kwok) nodes, started by `start()` and fully removed by `stop()`."""

    def __init__(self, work_dir: Path | None = None, *, nodes: int | NodePool = 3, gpus_per_node: int = 0,
                 gpu_nodes: int | None = None, crds: Sequence[Path] = (), apiserver_flags: Sequence[str] = (),
                 controller_manager_flags: Sequence[str] = (), scheduler_flags: Sequence[str] = (),
                 feature_gates: Sequence[str] = (), kcm_client_limits: tuple[float, int] = components.KCM_RAISED_LIMITS,
                 bin_dir: Path | None = None, keep_logs: Path | None = None, detach: bool = False,
                 start_timeout: float = START_TIMEOUT, verbose: bool = True) -> None:
        """`work_dir` defaults to a fresh temp dir. `keep_logs` copies the logs there on stop. `detach`
        (for the CLI) lets the processes outlive this Python process. `feature_gates` (``Name=true``) are added to
        the control plane's own in kube-apiserver, kube-controller-manager and kube-scheduler alike;
        `kcm_client_limits` is kube-controller-manager's (QPS, burst): the harness's raised 200/400 unless given
        (``components.KCM_DEFAULT_LIMITS`` is KCM's own 20/30)."""
        self.pool = nodes if isinstance(nodes, NodePool) else NodePool(count=nodes, gpus_per_node=gpus_per_node,
                                                                       gpu_nodes=gpu_nodes)
        self.crds = [Path(c) for c in crds]
        self.extra = {"apiserver": list(apiserver_flags), "kcm": list(controller_manager_flags),
                      "scheduler": list(scheduler_flags)}
        self.feature_gates = components.feature_gates_flag(tuple(feature_gates))
        self.kcm_client_limits = kcm_client_limits
        self._given_dir = work_dir
        self._work_dir: Path | None = None
        self._bin_dir = bin_dir
        self.keep_logs = keep_logs
        self.detach = detach
        self.start_timeout = start_timeout
        self.verbose = verbose
        self.processes: list[processes.Process] = []
        self.ports: components.Ports | None = None
        self.timings: dict[str, float] = {}
        self._rest: RestClient | None = None
        self.audit_log: Path | None = None  # set by whoever passed audit flags (hack.devcluster.audit)

    # ---- paths and clients
    @property
    def work_dir(self) -> Path:
        if self._work_dir is None:
            raise HarnessError("the cluster has not been started")
        return self._work_dir

    @property
    def bin_dir(self) -> Path:
        if self._bin_dir is None:
            self._bin_dir = find_bin_dir()
        return self._bin_dir

    @property
    def pki(self) -> Pki:
        return Pki(self.work_dir / "pki")

    @property
    def kubeconfig(self) -> Path:
        return self.work_dir / "kubeconfig"

    @property
    def logs_dir(self) -> Path:
        return self.work_dir / "logs"

    @property
    def ca_file(self) -> Path:
        return self.pki.ca_cert

    @property
    def admin_cert(self) -> Path:
        return self.pki.admin_cert

    @property
    def admin_key(self) -> Path:
        return self.pki.admin_key

    @property
    def server(self) -> str:
        if self.ports is None:
            raise HarnessError("the cluster has not been started")
        return f"https://127.0.0.1:{self.ports.apiserver}"

    @property
    def rest(self) -> RestClient:
        if self._rest is None:
            self._rest = RestClient(self.server, client_context(self.ca_file, self.admin_cert, self.admin_key))
        return self._rest

    def kubectl(self, *args: str, check: bool = False, input: str | None = None,
                timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl against this cluster as admin; returns the CompletedProcess (text). With ``check``,
        a failure raises CalledProcessError whose message ends with kubectl's stderr (what it said, not just its
        exit status)."""
        argv = [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}",
                f"--cache-dir={self.work_dir / 'kubectl-cache'}", *args]
        result = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise KubectlError(result.returncode, argv, result.stdout, result.stderr)
        return result

    # ---- lifecycle
    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> LocalCluster:
        """Start every component and wait until the nodes are Ready and schedulable. On failure,
        everything started so far is stopped and removed before the error propagates."""
        if self._work_dir is not None:
            raise HarnessError("the cluster is already started")
        bin_dir = self.bin_dir  # may build; not part of the start-up time
        began = time.monotonic()
        atexit.register(self.stop)  # an interpreter exit at any point still stops what was started
        self._work_dir = self._make_work_dir()
        try:
            self._start_all(bin_dir)
        except BaseException:  # including KeyboardInterrupt (Ctrl-C, or SIGTERM turned into it)
            self.stop()
            raise
        if self.detach:  # the CLI: the cluster outlives this process, `down` stops it
            atexit.unregister(self.stop)
        self.timings["total"] = time.monotonic() - began
        self._log(f"ready in {self.timings['total']:.1f}s: {self.server}, {len(self.pool.names())} nodes, "
                  f"kubeconfig {self.kubeconfig}")
        return self

    def _make_work_dir(self) -> Path:
        if self._given_dir is None:
            for stale in sweep_stale_temp_dirs():
                self._log(f"removed {stale}, left by a test run that was killed")
            work_dir = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        else:
            self._given_dir.mkdir(parents=True, exist_ok=True)
            work_dir = self._given_dir.resolve()
        write_state(work_dir, {"owner": owner_record().to_json(), "detached": self.detach, "processes": []})
        return work_dir

    def _start_all(self, bin_dir: Path) -> None:
        d = self.work_dir
        pki = create_pki(d / "pki", serving_sans=self.serving_sans())
        p = processes.free_port
        self.ports = ports = components.Ports(p(), p(), p(), p(), p())
        write_kubeconfig(self.kubeconfig, self.server, pki)
        etcd = self._spawn("etcd", components.etcd_argv(bin_dir / "etcd", d / "etcd", ports))
        self._timed("etcd", lambda: processes.wait_healthy(
            etcd, f"http://127.0.0.1:{ports.etcd}/health", self.start_timeout,
            healthy=lambda status, body: status == 200 and '"true"' in body))
        api = self._spawn("kube-apiserver", components.apiserver_argv(
            bin_dir / "kube-apiserver", pki, ports, self.extra["apiserver"], feature_gates=self.feature_gates))
        self._timed("kube-apiserver", lambda: processes.wait_healthy(
            api, f"{self.server}/readyz", self.start_timeout,
            context=client_context(pki.ca_cert, pki.admin_cert, pki.admin_key)))
        self._timed("crds", self._install_crds)
        kcm = self._spawn("kube-controller-manager", components.controller_manager_argv(
            bin_dir / "kube-controller-manager", self.kubeconfig, pki, ports, self.extra["kcm"],
            client_limits=self.kcm_client_limits, feature_gates=self.feature_gates))
        sched_config = components.write_scheduler_config(d / "scheduler.yaml", self.kubeconfig)
        sched = self._spawn("kube-scheduler", components.scheduler_argv(
            bin_dir / "kube-scheduler", sched_config, ports, self.extra["scheduler"], feature_gates=self.feature_gates))
        kwok_config = kwok.write_config(d / "kwok.yaml")
        self._spawn("kwok", kwok.argv(bin_dir / "kwok", self.kubeconfig, kwok_config),
                    env=kwok.environment(d / "kwok-home"))
        insecure = processes.insecure_context()
        self._timed("kube-controller-manager", lambda: processes.wait_healthy(
            kcm, f"https://127.0.0.1:{ports.controller_manager}/healthz", self.start_timeout, context=insecure))
        self._timed("kube-scheduler", lambda: processes.wait_healthy(
            sched, f"https://127.0.0.1:{ports.scheduler}/healthz", self.start_timeout, context=insecure))
        self._timed("nodes", self._create_nodes)

    def serving_sans(self) -> tuple[str, ...]:
        """Names and addresses the API server's certificate holds besides localhost and 127.0.0.1."""
        return ()

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> processes.Process:
        proc = processes.start(name, argv, self.logs_dir / f"{name}.log", env=env, cwd=self.work_dir,
                               die_with_parent=not self.detach)
        self.processes.append(proc)
        write_state(self.work_dir, self.state())  # at once: `down` or a sweep can stop a half-started cluster
        return proc

    def _timed(self, what: str, step: Callable[[], object]) -> None:
        began = time.monotonic()
        step()
        self.timings[what] = time.monotonic() - began
        self._log(f"{what} ready ({self.timings[what]:.1f}s)")

    def _install_crds(self) -> None:
        names: list[str] = []
        for path in self.crds:
            for doc in yaml.safe_load_all(path.read_text()):
                if doc:
                    self.rest.apply(CRD_PATH, doc)
                    names.append(doc["metadata"]["name"])

        def established() -> bool:
            return all(condition(self.rest.get(f"{CRD_PATH}/{n}"), "Established") == "True" for n in names)

        wait_for(established, self.start_timeout, 0.1, what=f"CRDs {', '.join(names)} Established")

    def _create_nodes(self) -> None:
        names = create_nodes(self.rest, self.pool)

        def all_ready() -> bool:
            for proc in self.processes:
                proc.check_running()
            return not unready_nodes(self.rest, names)

        wait_for(all_ready, self.start_timeout, 0.2, what=f"nodes {', '.join(names)} Ready and untainted")

    # ---- faults: one component stopped and started again
    RESTARTABLE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

    def restart(self, name: str, *, kill: bool = False, down_for: float = 0.0, start_at: float | None = None) -> float:
        """Stop one component (SIGTERM, or SIGKILL with ``kill``), leave it down ``down_for`` seconds
        (or until ``start_at``, a ``time.monotonic()`` value: an outage timed from the stop's signal
        however long the process takes to exit), and start it again with the same command line: same
        ports, same data (etcd's data directory, the PKI, the apiserver's audit log, which it appends
        to). Returns the seconds from the stop until the component is healthy again; for etcd, until
        the apiserver is ready again too."""
        if name not in self.RESTARTABLE:
            raise HarnessError(f"cannot restart {name!r}: one of {', '.join(self.RESTARTABLE)}")
        index = next((i for i, p in enumerate(self.processes) if p.name == name), None)
        if index is None:
            raise HarnessError(f"{name} is not one of this cluster's processes")
        old = self.processes[index]
        began = time.monotonic()
        old.kill() if kill else old.stop()
        self.timings[f"{name} stop"] = time.monotonic() - began
        if down_for:
            time.sleep(down_for)
        if start_at is not None:
            time.sleep(max(0.0, start_at - time.monotonic()))
        env = kwok.environment(self.work_dir / "kwok-home") if name == "kwok" else None
        proc = processes.start(name, old.record.argv, Path(old.record.log), env=env, cwd=self.work_dir,
                               die_with_parent=not self.detach)
        self.processes[index] = proc
        write_state(self.work_dir, self.state())
        self._wait_component(proc)
        if name == "etcd":
            api = next(p for p in self.processes if p.name == "kube-apiserver")
            self._wait_component(api)
        took = time.monotonic() - began
        self._log(f"{name} restarted ({'SIGKILL' if kill else 'SIGTERM'}, stopped in "
                  f"{self.timings[f'{name} stop']:.1f}s), healthy again after {took:.1f}s")
        return took

    def _wait_component(self, proc: processes.Process) -> None:
        """Until `proc` answers its health endpoint (the same checks as at start-up)."""
        if self.ports is None:
            raise HarnessError("the cluster has not been started")
        ports, insecure = self.ports, processes.insecure_context()
        if proc.name == "etcd":
            processes.wait_healthy(proc, f"http://127.0.0.1:{ports.etcd}/health", self.start_timeout,
                                   healthy=lambda status, body: status == 200 and '"true"' in body)
        elif proc.name == "kube-apiserver":
            processes.wait_healthy(proc, f"{self.server}/readyz", self.start_timeout,
                                   context=client_context(self.ca_file, self.admin_cert, self.admin_key))
        elif proc.name == "kube-controller-manager":
            processes.wait_healthy(proc, f"https://127.0.0.1:{ports.controller_manager}/healthz",
                                   self.start_timeout, context=insecure)
        elif proc.name == "kube-scheduler":
            processes.wait_healthy(proc, f"https://127.0.0.1:{ports.scheduler}/healthz", self.start_timeout,
                                   context=insecure)
        else:  # kwok has no health endpoint of its own here: it must stay up a moment
            time.sleep(1.0)
            proc.check_running()

    def stop(self) -> None:
        """Stop exactly the processes this cluster started (kwok first, etcd last), then remove the
        runtime data (the whole temp dir, or everything but `logs/` in a given work dir)."""
        atexit.unregister(self.stop)
        errors = []
        for proc in reversed(self.processes):
            try:
                proc.stop()
            except HarnessError as err:
                errors.append(str(err))
        self.processes = []
        if self._work_dir is not None:
            remove_runtime_data(self._work_dir, owned=self._given_dir is None, keep_logs=self.keep_logs)
            self._work_dir = None
        self._rest = None
        if errors:
            raise HarnessError("; ".join(errors))

    # ---- reporting
    def rss_bytes(self) -> dict[str, int]:
        """Resident memory of each running component, from /proc/<pid>/status."""
        return {p.name: processes.rss_of(p.pid) for p in self.processes if p.running()}

    def state(self) -> dict[str, Any]:
        """What the CLI records in state.json."""
        return {"owner": owner_record().to_json(), "detached": self.detach,
                "server": self.server, "kubeconfig": str(self.kubeconfig), "work_dir": str(self.work_dir),
                "bin_dir": str(self.bin_dir), "ports": vars(self.ports) if self.ports else {},
                "nodes": self.pool.names(), "processes": [p.record.to_json() for p in self.processes]}

    def _log(self, message: str) -> None:
        if self.verbose:
            print(f"[harness] {message}", file=sys.stderr, flush=True)
