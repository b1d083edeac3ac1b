"""B2: the webhook server's capacity in isolation (spec/performance.md B2), over TLS keep-alive.

Serves ``python -m webhook`` (pinned to CPU 0 when ``taskset`` exists), then a trivial aiohttp handler
as the machine's yardstick (``hack/trivial_webhook.py``), and drives both with ``wrk``
(pinned to CPU 1) with synthetic MPIJob CREATE reviews of about 5, 20 and 50 KB, at concurrency 1 and
16, on both admission endpoints. Prints req/s, p50/p99, server CPU per request, req/s per core of
server CPU, and the server's peak RSS. A benchmark, not a test: it asserts only that every answer was
a 200. Usage: ``python -m hack.bench_webhook [--duration 8] [--warmup 2]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from hack.payloads import admission_review, mpijob_of_size
from hack.procstat import ProcessSample, free_port, wait_for_https

SIZES_KB = (5, 20, 50)
CONCURRENCY = (1, 16)
ENDPOINTS = {"validate": "/validate-kubeflow-org-v2beta1-mpijob", "mutate": "/mutate-kubeflow-org-v2beta1-mpijob"}
LUA = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("{body}", "rb"); wrk.body = f:read("*a"); f:close()
"""


@dataclass
class Row:
    endpoint: str
    size_kb: int
    body_bytes: int
    concurrency: int
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    cpu_us_per_request: float
    per_core: float


def pinned(cpu: int, argv: list[str]) -> list[str]:
    return ["taskset", "-c", str(cpu), *argv] if shutil.which("taskset") and (os.cpu_count() or 1) > 1 else argv


def parse_wrk(output: str) -> tuple[float, float, float, int]:
    """(req/s, p50 ms, p99 ms, requests) from ``wrk --latency`` output; fails on non-2xx answers."""
    if "Non-2xx" in output:
        raise SystemExit(f"the webhook answered errors:\n{output}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", output).group(1))  # type: ignore[union-attr]

    def pct(p: str) -> float:
        value, unit = re.search(rf"\s{p}%\s+([\d.]+)(us|ms|s)", output).groups()  # type: ignore[union-attr]
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]

    return rps, pct("50"), pct("99"), total


def run_wrk(url: str, script: Path, concurrency: int, seconds: float) -> str:
    duration = f"-d{max(1, round(seconds))}s"
    argv = pinned(1, ["wrk", "-t1", f"-c{concurrency}", duration, "--latency", "-s", str(script), url])
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def measure(url: str, script: Path, concurrency: int, args: argparse.Namespace, server: int) -> tuple[str, float]:
    run_wrk(url, script, concurrency, args.warmup)
    before = ProcessSample.of(server)
    output = run_wrk(url, script, concurrency, args.duration)
    return output, ProcessSample.of(server).cpu_seconds - before.cpu_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds measured per configuration")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up per configuration")
    parser.add_argument("--log-level", default="info", help="the webhook's log level (info: one line per request)")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is needed for this benchmark: apt-get install wrk")
    with tempfile.TemporaryDirectory(prefix="bench-webhook-") as tmp:
        rows, rss_kb = run_all(Path(tmp), args)
    report(rows, rss_kb, args)


@contextlib.contextmanager
def server(tmp: Path, module: str, extra: list[str]) -> Iterator[tuple[int, int]]:
    """Run ``python -m module`` over TLS on CPU 0; yields (pid, port)."""
    port = free_port()
    argv = pinned(0, [sys.executable, "-m", module, "--port", str(port), "--tls-cert-file", str(tmp / "tls.crt"),
                      "--tls-key-file", str(tmp / "tls.key"), *extra])
    with (tmp / f"{module}.log").open("wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=log)
    try:
        started = time.monotonic()
        wait_for_https(f"https://127.0.0.1:{port}/readyz", tmp / "ca.crt", timeout=30)
        print(f"{module} ready {time.monotonic() - started:.2f} s after exec", file=sys.stderr)
        yield process.pid, port
    finally:
        process.terminate()
        process.wait(timeout=15)


def run_all(tmp: Path, args: argparse.Namespace) -> tuple[list[Row], int]:
    subprocess.run([sys.executable, "-m", "webhook.certs", "--out-dir", str(tmp), "--ip", "127.0.0.1"],
                   check=True, capture_output=True)
    rows: list[Row] = []
    with server(tmp, "webhook", ["--bind-address", "127.0.0.1", "--log-level", args.log_level]) as (pid, port):
        for size in SIZES_KB:
            rows += bench_size(tmp, port, size, args, pid, ENDPOINTS)
        rss_kb = ProcessSample.of(pid).peak_rss_kb
    with server(tmp, "hack.trivial_webhook", []) as (pid, port):
        for size in SIZES_KB:
            rows += bench_size(tmp, port, size, args, pid, {"trivial": "/trivial"})
    return rows, rss_kb


def bench_size(tmp: Path, port: int, size_kb: int, args: argparse.Namespace, server_pid: int,
               endpoints: dict[str, str]) -> list[Row]:
    body = orjson.dumps(admission_review(mpijob_of_size("bench", size_kb * 1000)))
    (tmp / f"{size_kb}.json").write_bytes(body)
    script = tmp / f"{size_kb}.lua"
    script.write_text(LUA.format(body=tmp / f"{size_kb}.json"))
    rows = []
    for endpoint, path in endpoints.items():
        for concurrency in CONCURRENCY:
            output, cpu = measure(f"https://127.0.0.1:{port}{path}", script, concurrency, args, server_pid)
            rps, p50, p99, total = parse_wrk(output)
            cpu_us = cpu / total * 1e6
            rows.append(Row(endpoint, size_kb, len(body), concurrency, rps, p50, p99, cpu_us, 1e6 / cpu_us))
            print(f"{endpoint:8} {size_kb:3} KB c={concurrency:<3} {rps:8.0f} req/s", file=sys.stderr)
    return rows


def report(rows: list[Row], rss_kb: int, args: argparse.Namespace) -> None:
    print(f"# B2 webhook server alone: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"wrk keep-alive over TLS, {args.duration:g} s per row after {args.warmup:g} s warm-up, "
          f"webhook log level {args.log_level}")
    print("| endpoint | body | c | req/s | p50 ms | p99 ms | server CPU us/req | req/s per core |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.endpoint} | {r.size_kb} KB ({r.body_bytes} B) | {r.concurrency} | {r.requests_per_s:,.0f} | "
              f"{r.p50_ms:.2f} | {r.p99_ms:.2f} | {r.cpu_us_per_request:.0f} | {r.per_core:,.0f} |")
    print(f"webhook peak RSS: {rss_kb / 1024:.1f} MiB")
    trivial = {(r.size_kb, r.concurrency): r for r in rows if r.endpoint == "trivial"}
    print("\nour webhook's req/s per core as a fraction of the trivial handler's, same machine and run:")
    for r in rows:
        if r.endpoint != "trivial":
            base = trivial[(r.size_kb, r.concurrency)]
            print(f"- {r.endpoint} {r.size_kb} KB c={r.concurrency}: {r.per_core / base.per_core:.0%}")


if __name__ == "__main__":
    main()
