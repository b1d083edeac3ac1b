"""The reconciler as a Deployment's container would run it: restarted whenever it exits.

``SupervisedReconciler`` starts ``python -m reconciler`` with the given flags (after the shipped
Deployment's args with ``as_shipped``), and a monitor thread starts it again whenever it exits (as a
kubelet restarts a container; a short fixed delay instead of CrashLoopBackOff). ``kill()`` SIGKILLs the
current process, as a crash or an OOM kill would, and starts the next one at once. Exits it did not
cause are recorded in ``unexpected_exits``, with the end of the run's log. Every run writes its own log
file (``run-N.log``). The fault tests and the recovery benchmark (hack/bench/recovery.py) use it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hack.devcluster import LocalCluster
from hack.devcluster.operators import REPO_ROOT, shipped_reconciler_args
from hack.devcluster.processes import free_port
from hack.devcluster.rest import ApiError

# The reconciler's defaults: leader election on (Lease in mpi-operator), 2 workers, queue rate 10, child-event
# delay 0.2 s, progress writes 1 s apart, and no client-side rate limit (the API server's Priority and
# Fairness pushes back with 429s). A test may add flags of its own.
FLAGS: tuple[str, ...] = ()
LOCK_NAMESPACE = "mpi-operator"
RESTART_DELAY = 0.5  # seconds between an exit and the next start
SYNCED = b"caches synced"


@dataclass
class Exit:
    run: int
    code: int | None
    after: float  # seconds the run lasted
    tail: str


@dataclass
class Run:
    number: int
    popen: subprocess.Popen[bytes]
    log: Path
    started: float
    killed: bool = False
    synced_at: float | None = None
    _offset: int = 0
    _carry: bytes = b""

    def poll_synced(self) -> float | None:
        """When this run logged "caches synced" (it leads and reconciles), by the monotonic clock."""
        if self.synced_at is None and self.log.exists():
            with self.log.open("rb") as stream:
                stream.seek(self._offset)
                chunk = stream.read()
            self._offset += len(chunk)
            if SYNCED in self._carry + chunk:
                self.synced_at = time.monotonic()
            self._carry = chunk[-len(SYNCED):]
        return self.synced_at


@dataclass
class SupervisedReconciler:
    cluster: LocalCluster
    work_dir: Path
    flags: tuple[str, ...] = FLAGS
    as_shipped: bool = False  # the shipped Deployment's container args first (deploy/reconciler)
    runs: list[Run] = field(default_factory=list)
    kills: int = 0
    unexpected_exits: list[Exit] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _monitor: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)

    # ---- lifecycle
    def start(self) -> SupervisedReconciler:
        ensure_namespace(self.cluster, LOCK_NAMESPACE)
        with self._lock:
            self._spawn()
        self._monitor = threading.Thread(target=self._watch, name="reconciler-supervisor", daemon=True)
        self._monitor.start()
        return self

    def stop(self) -> None:
        """SIGTERM the current run (SIGKILL after 15 s) and stop restarting it."""
        self._stopping.set()
        if self._monitor is not None:
            self._monitor.join(timeout=5)
        with self._lock:
            run = self.current
            if run is not None and run.popen.poll() is None:
                run.popen.send_signal(signal.SIGTERM)
                try:
                    run.popen.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    run.popen.kill()
                    run.popen.wait(timeout=10)

    def __enter__(self) -> SupervisedReconciler:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def current(self) -> Run | None:
        return self.runs[-1] if self.runs else None

    def kill(self) -> int:
        """SIGKILL the current run and start the next one at once; returns the killed run's number."""
        with self._lock:
            run = self.current
            assert run is not None
            run.killed = True
            with contextlib.suppress(ProcessLookupError):
                run.popen.kill()
            run.popen.wait(timeout=10)
            self.kills += 1
            self._spawn()
            return run.number

    # ---- state of the current run
    def log_text(self, run: Run | None = None) -> str:
        run = run or self.current
        return run.log.read_text(errors="replace") if run is not None and run.log.exists() else ""

    def synced_for(self) -> float | None:
        """Seconds since the current run logged "caches synced", or None while it has not."""
        run = self.current
        synced = run.poll_synced() if run is not None else None
        return None if synced is None else time.monotonic() - synced

    def wait_synced(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while self.synced_for() is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the reconciler did not sync within {timeout} s:\n{tail(self.log_text())}")
            time.sleep(0.1)

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the current run has used so far."""
        run = self.current
        if run is None or run.popen.poll() is not None:
            return 0.0
        raw = Path(f"/proc/{run.popen.pid}/stat").read_text()
        fields = raw[raw.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def sync_durations(self) -> list[float]:
        """The durations (ms) of every sync the runs logged."""
        found = re.findall(r"msg=sync .*?duration_ms=([0-9.]+)", self.all_logs())
        return sorted(float(ms) for ms in found)

    def check_no_unexpected_exit(self) -> None:
        if self.unexpected_exits:
            last = self.unexpected_exits[-1]
            raise RuntimeError(f"reconciler run {last.run} exited with status {last.code} after {last.after:.1f} s; "
                               f"last log lines:\n{last.tail}")

    def all_logs(self) -> str:
        return "\n".join(self.log_text(run) for run in self.runs)

    # ---- internals
    def _spawn(self) -> None:
        number = len(self.runs) + 1
        log = self.work_dir / f"run-{number}.log"
        shipped = shipped_reconciler_args() if self.as_shipped else []
        argv = [sys.executable, "-m", "reconciler", *shipped, f"--kubeConfig={self.cluster.kubeconfig}",
                f"--health-port={free_port()}", f"--monitoring-port={free_port()}", *self.flags]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("KUBECONFIG", None)
        with log.open("ab") as out:
            popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT,
                                     start_new_session=True)
        self.runs.append(Run(number, popen, log, time.monotonic()))

    def _watch(self) -> None:
        while not self._stopping.wait(0.1):
            with self._lock:
                run = self.current
                if run is None or run.killed or run.popen.poll() is None:
                    continue
                self.unexpected_exits.append(Exit(run.number, run.popen.returncode,
                                                  time.monotonic() - run.started, tail(self.log_text(run))))
            time.sleep(RESTART_DELAY)
            with self._lock:
                if not self._stopping.is_set():
                    self._spawn()


def tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.splitlines()[-lines:])


def ensure_namespace(cluster: LocalCluster, name: str) -> None:
    try:
        cluster.rest.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": name}})
    except ApiError as error:
        if error.status != 409:
            raise
