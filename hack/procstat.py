"""Small process and network helpers for benchmarks (Linux /proc)."""

from __future__ import annotations

import os
import socket
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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
