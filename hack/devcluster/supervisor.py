"""The reconciler as a Deployment's container would run it: restarted whenever it exits, with kubelet's
crash-loop back-off.

``SupervisedReconciler`` starts ``python -m reconciler`` with the given flags (after the shipped
Deployment's args with ``as_shipped``), and a monitor thread starts it again whenever it exits, as a kubelet
restarts a container: the first restart at once, each further one after kubelet's back-off (10 s doubling to
5 minutes, ``RestartBackoff``), which a run that lasted 10 minutes resets. With ``liveness=True`` it also
probes ``/healthz`` as the shipped Deployment's livenessProbe does (after 10 s, every 10 s, 1 s timeout,
3 failures) and restarts a run that fails it (SIGTERM, SIGKILL 30 s later), as a kubelet would. ``kill()``
SIGKILLs the current process, as a crash or an OOM kill would, and starts the next one at once (no
back-off: the kill suite's successor must start as a new replica would). Exits it did not cause are recorded
in ``unexpected_exits``, with the end of the run's log, the back-off before the next run and the reason.
Every run writes its own log file (``run-N.log``). The fault tests and the recovery benchmark
(hack/bench/recovery.py) use it.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hack.devcluster import LocalCluster
from hack.devcluster.operators import REPO_ROOT, shipped_reconciler_args
from hack.devcluster.processes import free_port, http_get, terminate
from hack.devcluster.rest import ApiError

# The reconciler's defaults: leader election on (Lease in mpi-operator), 2 workers, queue rate 10, child-event
# delay 0.2 s, progress writes 1 s apart, and no client-side rate limit (the API server's Priority and
# Fairness pushes back with 429s). A test may add flags of its own.
FLAGS: tuple[str, ...] = ()
LOCK_NAMESPACE = "mpi-operator"
RESTART_DELAY = 0.5  # seconds between an exit and the first restart (a kubelet notices within about that)
SYNCED = b"caches synced"


@dataclass(frozen=True)
class RestartBackoff:
    """kubelet's CrashLoopBackOff: the first restart at once, then ``initial`` doubling up to ``cap`` seconds
    between an exit and the next start; a run that lasted ``reset_after`` seconds starts the count again."""

    initial: float = 10.0
    cap: float = 300.0
    reset_after: float = 600.0

    def delay(self, exits: int) -> float:
        """Seconds before the restart that follows the ``exits``-th exit in a row (1-based)."""
        return RESTART_DELAY if exits <= 1 else min(self.cap, self.initial * 2.0 ** (exits - 2))


KUBELET_BACKOFF = RestartBackoff()


@dataclass(frozen=True)
class Probe:
    """The shipped Deployment's livenessProbe on /healthz."""

    initial_delay: float = 10.0
    period: float = 10.0
    timeout: float = 1.0
    failures: int = 3
    grace: float = 30.0  # terminationGracePeriodSeconds: SIGTERM, then SIGKILL


LIVENESS = Probe()


@dataclass
class Exit:
    run: int
    code: int | None
    after: float  # seconds the run lasted
    tail: str
    reason: str = "exited"  # or "liveness probe failed"
    backoff: float = 0.0  # seconds waited before the next run


@dataclass
class Run:
    number: int
    popen: subprocess.Popen[bytes]
    log: Path
    started: float
    health_port: int = 0
    monitoring_port: int = 0
    killed: bool = False
    liveness_failed: bool = False
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
    backoff: RestartBackoff = KUBELET_BACKOFF
    liveness: bool = False  # probe /healthz as the shipped livenessProbe does, restart a run that fails it
    create_lock_namespace: bool = True  # at start(); False when the test made it (the API server may be down)
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
        if self.create_lock_namespace:
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
                terminate(run.popen, grace=15)

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
        health_port, monitoring_port = free_port(), free_port()
        argv = [sys.executable, "-m", "reconciler", *shipped, f"--kubeConfig={self.cluster.kubeconfig}",
                f"--health-port={health_port}", f"--monitoring-port={monitoring_port}", *self.flags]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("KUBECONFIG", None)
        with log.open("ab") as out:
            popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT,
                                     start_new_session=True)
        self.runs.append(Run(number, popen, log, time.monotonic(), health_port, monitoring_port))

    def _watch(self) -> None:
        in_a_row = 0  # exits since the last run that lasted backoff.reset_after
        next_probe, failures = 0.0, 0
        while not self._stopping.wait(0.1):
            run = self.current
            if run is None or run.killed:
                continue
            if run.popen.poll() is None:
                if self.liveness:
                    next_probe, failures = self._probe(run, next_probe, failures)
                continue
            with self._lock:
                if run is not self.current or run.killed:
                    continue
                lasted = time.monotonic() - run.started
                in_a_row = 1 if lasted >= self.backoff.reset_after else in_a_row + 1
                delay = self.backoff.delay(in_a_row)
                self.unexpected_exits.append(Exit(run.number, run.popen.returncode, lasted, tail(self.log_text(run)),
                                                  "liveness probe failed" if run.liveness_failed else "exited", delay))
            next_probe, failures = 0.0, 0
            if self._stopping.wait(delay):
                return
            with self._lock:
                if not self._stopping.is_set() and self.current is run:
                    self._spawn()

    def _probe(self, run: Run, next_probe: float, failures: int) -> tuple[float, int]:
        """One liveness probe when due: (when the next is due, the failures in a row). A run that fails
        ``LIVENESS.failures`` probes in a row is stopped (SIGTERM, SIGKILL after the grace period)."""
        now = time.monotonic()
        if now < max(next_probe, run.started + LIVENESS.initial_delay):
            return next_probe, failures
        try:
            status, _ = http_get(f"http://127.0.0.1:{run.health_port}/healthz", timeout=LIVENESS.timeout)
            healthy = 200 <= status < 400
        except OSError:
            healthy = False
        failures = 0 if healthy else failures + 1
        if failures >= LIVENESS.failures and run.popen.poll() is None:
            run.liveness_failed = True
            terminate(run.popen, grace=LIVENESS.grace)
        return now + LIVENESS.period, failures


def tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.splitlines()[-lines:])


def ensure_namespace(cluster: LocalCluster, name: str) -> None:
    try:
        cluster.rest.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": name}})
    except ApiError as error:
        if error.status != 409:
            raise
