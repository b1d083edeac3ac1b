"""Start, watch and stop the control-plane processes.

Each process runs in its own session (so a terminal's Ctrl-C does not reach it), writes stdout and
stderr to one log file, and is identified by its PID plus its kernel start time, so that stopping a
recorded process never signals an unrelated process that reused the PID.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .wait import HarnessError, wait_for

PR_SET_PDEATHSIG = 1
STOP_TIMEOUT = 20.0  # envtest's default stop timeout


class ProcessDiedError(HarnessError):
    """A component exited while the harness was waiting for it."""


@dataclass(frozen=True)
class ProcessRecord:
    """What identifies a started process; serialisable into the CLI's state file."""

    name: str
    pid: int
    start_ticks: int
    argv: list[str]
    log: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessRecord:
        return cls(name=str(data["name"]), pid=int(data["pid"]), start_ticks=int(data["start_ticks"]),
                   argv=[str(a) for a in data["argv"]], log=str(data["log"]))


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks) of a PID from /proc, or None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rindex(")") + 2:].split()  # fields 3.. of proc(5); comm may contain spaces
    return fields[0], int(fields[19])


def proc_start_ticks(pid: int) -> int:
    stat = _stat(pid)
    return stat[1] if stat else -1


def rss_of(pid: int) -> int:
    """Resident memory of a process in bytes (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def is_running(record: ProcessRecord) -> bool:
    """True while the recorded process (same PID *and* same start time) exists and is not a zombie."""
    stat = _stat(record.pid)
    return stat is not None and stat[1] == record.start_ticks and stat[0] != "Z"


def log_tail(path: str | Path, lines: int = 30) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Process:
    """A started component: its record plus, when this Python process is its parent, the Popen."""

    def __init__(self, record: ProcessRecord, popen: subprocess.Popen[bytes] | None = None) -> None:
        self.record = record
        self.popen = popen

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def pid(self) -> int:
        return self.record.pid

    def running(self) -> bool:
        if self.popen is not None and self.popen.poll() is not None:
            return False
        return is_running(self.record)

    def check_running(self) -> None:
        """Raise ProcessDiedError, with the end of the component's log, if it has exited."""
        if not self.running():
            code = self.popen.returncode if self.popen is not None else "?"
            raise ProcessDiedError(f"{self.name} (pid {self.pid}) exited with status {code}; "
                              f"last lines of {self.record.log}:\n{log_tail(self.record.log)}")

    def kill(self, timeout: float = 5.0) -> None:
        """SIGKILL, as a crash or an OOM kill would, and wait until it is gone."""
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            wait_for(lambda: not self.running(), timeout, 0.02, what=f"{self.name} to die")
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=1)  # reap

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM, then SIGKILL if the process is still there after `timeout` seconds."""
        for sig, grace in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            if not self.running():
                break
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)
            with contextlib.suppress(HarnessError):
                wait_for(lambda: not self.running(), grace, 0.05, what=f"{self.name} to exit")
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=1)  # reap
        if self.running():
            raise HarnessError(f"{self.name} (pid {self.pid}) did not exit after SIGKILL")


def terminate(popen: subprocess.Popen[bytes], grace: float) -> int:
    """SIGTERM `popen`, as kubelet stops a container, then SIGKILL once `grace` seconds have passed; its exit status."""
    with contextlib.suppress(ProcessLookupError):
        popen.send_signal(signal.SIGTERM)
    try:
        return popen.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        popen.kill()
        return popen.wait(timeout=10)


def start(name: str, argv: Sequence[str], log_path: Path, *, env: Mapping[str, str] | None = None,
          cwd: Path | None = None, die_with_parent: bool = True) -> Process:
    """Start `argv` in a new session with stdout and stderr appended to `log_path`.

    With `die_with_parent`, the kernel SIGKILLs it when the calling thread exits: a safety net for a
    test run that is itself killed (SIGKILL, because a SIGTERM reaching all components at once leaves
    the apiserver hanging in its graceful shutdown once etcd is gone). The CLI turns it off so that
    the cluster outlives it. It applies only when called from the main thread, since PDEATHSIG
    follows the thread that forked.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    pdeath = die_with_parent and threading.current_thread() is threading.main_thread()
    with log_path.open("ab") as log:
        popen = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True,
                                 preexec_fn=_die_with_parent if pdeath else None)  # noqa: PLW1509
    record = ProcessRecord(name=name, pid=popen.pid, start_ticks=proc_start_ticks(popen.pid), argv=list(argv),
                           log=str(log_path))
    return Process(record, popen)


def free_port() -> int:
    """A TCP port that nothing is bound to right now, on any interface, for a process about to listen on it.

    The port is handed over before the process binds it. A port the kernel picks with ``bind(0)`` lies in its
    ephemeral range, where any outgoing connection made meanwhile (thousands in a test run) may take it as its
    source port, and the listener then fails with "address already in use". So the ports come from outside that
    range, in turn from a random start in each process, so that two processes (test workers) handing out ports
    at the same moment do not hand out the same one."""
    return _PORTS.take()


def ephemeral_ports(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> range:
    """The kernel's range of source ports for outgoing connections."""
    low, high = (int(field) for field in path.read_text().split())
    return range(low, high + 1)


def listening_ports(ephemeral: range, lowest: int = 10000) -> list[int]:
    """The ports from ``lowest`` up that are outside ``ephemeral``; all of them if none is."""
    ports = [port for port in range(lowest, 65536) if port not in ephemeral]
    return ports or list(range(lowest, 65536))


def bindable(port: int) -> bool:
    """Whether a listener could bind ``port`` on every interface now (no socket holds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("0.0.0.0", port))  # without SO_REUSEADDR: refused while any socket holds the port
        except OSError:
            return False
        return True


class PortPool:
    """``ports`` handed out in turn, from a random start, skipping those in use."""

    def __init__(self, ports: Sequence[int]) -> None:
        self.ports = ports
        self.next = random.SystemRandom().randrange(len(ports))
        self.lock = threading.Lock()

    def take(self, usable: Callable[[int], bool] = bindable) -> int:
        with self.lock:
            for _ in range(len(self.ports)):
                port = self.ports[self.next]
                self.next = (self.next + 1) % len(self.ports)
                if usable(port):
                    return port
        raise HarnessError(f"none of the {len(self.ports)} ports from {self.ports[0]} to {self.ports[-1]} is free")


_PORTS = PortPool(listening_ports(ephemeral_ports()))


def http_get(url: str, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> tuple[int, str]:
    """GET `url`: (status, body). HTTP errors are returned, connection errors raised as OSError."""
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            return int(resp.status), resp.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def insecure_context() -> ssl.SSLContext:
    """For the self-signed health endpoints of kube-controller-manager and kube-scheduler."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def wait_healthy(proc: Process, url: str, timeout: float, *, context: ssl.SSLContext | None = None,
                 healthy: Callable[[int, str], bool] = lambda status, body: status == 200) -> float:
    """Poll `url` until `healthy(status, body)`; fail fast with the log tail if `proc` exits.

    Returns the seconds waited."""
    began = time.monotonic()

    def probe() -> bool:
        proc.check_running()
        try:
            return healthy(*http_get(url, context))
        except OSError:
            return False

    try:
        wait_for(probe, timeout, 0.1, what=f"{proc.name} at {url}")
    except ProcessDiedError:
        raise
    except HarnessError as err:
        raise HarnessError(f"{err}; last lines of {proc.record.log}:\n{log_tail(proc.record.log)}") from None
    return time.monotonic() - began
