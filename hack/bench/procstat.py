"""Small process and network helpers for benchmarks (Linux /proc)."""

from __future__ import annotations

import os
import ssl
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcessSample:
    cpu_seconds: float
    peak_rss_kb: int
    rss_kb: int

    @classmethod
    def of(cls, pid: int) -> ProcessSample:
        """User+system CPU time and memory of a live process."""
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / _TICKS
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
        )
        return cls(cpu, int(status["VmHWM"].split()[0]), int(status["VmRSS"].split()[0]))


def open_sockets(pid: int) -> int:
    """How many sockets a live process holds open (its ``socket:`` file descriptors)."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += os.readlink(fd).startswith("socket:")
        except FileNotFoundError:  # closed while listed
            continue
    return count


def wait_for_https(url: str, ca_file: Path, timeout: float) -> None:
    """Poll ``url`` until it answers 200, or raise TimeoutError."""
    context = ssl.create_default_context(cafile=str(ca_file))
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, context=context, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer within {timeout} s")
        time.sleep(0.02)


def cpu_by_process() -> dict[int, tuple[str, float]]:
    """{pid: (command name, user+system CPU seconds)} of every process now alive."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        name = text[text.index("(") + 1: text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        out[int(entry.name)] = (name, (int(fields[11]) + int(fields[12])) / _TICKS)
    return out


def cpu_used(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
             labels: dict[int, str] | None = None) -> dict[str, float]:
    """CPU seconds used between two ``cpu_by_process`` samples, by command name (or by the label given to a
    pid: the operator, the load generator); processes of one name are added up."""
    used: dict[str, float] = {}
    for pid, (name, cpu) in after.items():
        label = (labels or {}).get(pid, name)
        used[label] = used.get(label, 0.0) + cpu - before.get(pid, (name, 0.0))[1]
    return used


def describe_shares(percent: dict[str, float], least: float = 2.0) -> str:
    """``kube-apiserver 98 %, etcd 21 %, ... (all 190 % of one core)``, largest first, those under ``least``
    percent of one core left out of the list (not out of the total)."""
    shown = [f"{label} {value:.0f} %" for label, value in sorted(percent.items(), key=lambda kv: -kv[1])
             if value >= least]
    return f"{', '.join(shown)} (all {sum(percent.values()):.0f} % of one core)"
