"""B2: the webhook server's capacity in isolation (spec/performance.md B2), over TLS keep-alive.

Starts ``python -m webhook`` and the trivial aiohttp handler (``hack/bench/trivial_webhook.py``, the machine's
yardstick) side by side, both pinned to CPU 0 when ``taskset`` exists, and drives them with ``wrk``
(pinned to CPU 1) with synthetic MPIJob CREATE reviews of about 5, 20 and 50 KB at concurrency 1 and 16.
The configurations are interleaved: every round measures the trivial handler and both of our endpoints
back to back for each size and concurrency (the order reversed every other round), so that load from
other processes hits both alike; the ratio ours/trivial is taken per round. Prints medians with min-max
over the rounds: req/s, p50/p99, server CPU per request, req/s per core of server CPU, idle and peak RSS.
Writes them, with the date and commit, to hack/bench/results/webhook.json and the summary of
docs/benchmarks.md from the results files (hack/bench/doc.py); ``--no-docs`` only prints.
A benchmark, not a test: it asserts only that every answer was a 200. Installs ``wrk`` with apt-get when
it is missing and we are root. Usage: ``python -m hack.bench.webhook [--rounds 3] [--sizes 5,20,50]``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from hack.bench import doc as benchdoc
from hack.bench.figures import show, stat
from hack.bench.payloads import admission_review, mpijob_of_size
from hack.bench.procstat import ProcessSample, wait_for_https
from hack.devcluster.processes import free_port

ENDPOINTS = {"validate": "/validate-kubeflow-org-v2beta1-mpijob", "mutate": "/mutate-kubeflow-org-v2beta1-mpijob",
             "trivial": "/trivial"}
LUA = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("{body}", "rb"); wrk.body = f:read("*a"); f:close()
"""
WRK_INSTALL = "apt-get update && apt-get install -y wrk"


@dataclass(frozen=True)
class Run:
    """One wrk run against one endpoint."""

    endpoint: str
    size_kb: int
    concurrency: int
    round: int
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    cpu_us_per_request: float

    @property
    def per_core(self) -> float:
        return 1e6 / self.cpu_us_per_request


def ensure_wrk() -> None:
    """Install wrk from the distribution when it is missing and we may (root, apt-get); else say how."""
    if shutil.which("wrk"):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SystemExit(f"wrk is needed for this benchmark; install it with: sudo sh -c '{WRK_INSTALL}'")
    print("wrk is missing: installing it with apt-get", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "wrk"]
    if subprocess.run(install, env=env, capture_output=True, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=True)
        subprocess.run(install, env=env, capture_output=True, check=True)
    if not shutil.which("wrk"):
        raise SystemExit(f"could not install wrk; try: {WRK_INSTALL}")


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


def write_bodies(tmp: Path, sizes: Sequence[int]) -> dict[int, Path]:
    scripts = {}
    for size_kb in sizes:
        body = tmp / f"{size_kb}.json"
        body.write_bytes(orjson.dumps(admission_review(mpijob_of_size("bench", size_kb * 1000))))
        scripts[size_kb] = tmp / f"{size_kb}.lua"
        scripts[size_kb].write_text(LUA.format(body=body))
    return scripts


def run_all(tmp: Path, args: argparse.Namespace) -> tuple[list[Run], dict[str, float]]:
    subprocess.run([sys.executable, "-m", "webhook.certs", "--out-dir", str(tmp), "--ip", "127.0.0.1"],
                   check=True, capture_output=True)
    scripts = write_bodies(tmp, args.sizes)
    ours_args = ["--bind-address", "127.0.0.1", "--log-level", args.log_level]
    with server(tmp, "webhook", ours_args) as ours, server(tmp, "hack.bench.trivial_webhook", []) as trivial:
        time.sleep(1.0)  # let start-up settle before the idle sample
        memory = {"idle_mib": ProcessSample.of(ours[0]).rss_kb / 1024,
                  "trivial_idle_mib": ProcessSample.of(trivial[0]).rss_kb / 1024}
        targets = {"trivial": trivial, "mutate": ours, "validate": ours}
        runs = []
        for number in range(args.rounds):
            order = list(targets) if number % 2 == 0 else list(reversed(targets))
            for size_kb in args.sizes:
                for concurrency in args.concurrency:
                    for endpoint in order:
                        pid, port = targets[endpoint]
                        runs.append(measure(endpoint, size_kb, concurrency, number, port, pid, scripts[size_kb], args))
        memory["peak_mib"] = ProcessSample.of(ours[0]).peak_rss_kb / 1024
        memory["end_mib"] = ProcessSample.of(ours[0]).rss_kb / 1024
    return runs, memory


def measure(endpoint: str, size_kb: int, concurrency: int, number: int, port: int, pid: int, script: Path,
            args: argparse.Namespace) -> Run:
    url = f"https://127.0.0.1:{port}{ENDPOINTS[endpoint]}"
    run_wrk(url, script, concurrency, args.warmup)
    before = ProcessSample.of(pid)
    output = run_wrk(url, script, concurrency, args.duration)
    cpu = ProcessSample.of(pid).cpu_seconds - before.cpu_seconds
    rps, p50, p99, total = parse_wrk(output)
    run = Run(endpoint, size_kb, concurrency, number, rps, p50, p99, cpu / total * 1e6)
    print(f"round {number + 1} {endpoint:8} {size_kb:3} KB c={concurrency:<3} {rps:8.0f} req/s "
          f"p99 {p99:.2f} ms {run.per_core:7.0f}/core", file=sys.stderr)
    return run


def summarize(runs: list[Run], memory: dict[str, float], args: argparse.Namespace, date: str,
              argv: list[str]) -> dict[str, Any]:
    """The run's figures as hack/bench/results/webhook.json keeps them: per endpoint, size and concurrency the
    median, min and max over the rounds, and ours/trivial per core paired within each round (percent)."""
    groups: dict[tuple[str, int, int], list[Run]] = {}
    for run in sorted(runs, key=lambda r: (r.size_kb, r.concurrency)):
        groups.setdefault((run.endpoint, run.size_kb, run.concurrency), []).append(run)
    trivial = {(r.size_kb, r.concurrency, r.round): r for r in runs if r.endpoint == "trivial"}
    fields = ("requests_per_s", "p50_ms", "p99_ms", "cpu_us_per_request", "per_core")
    rows, ratios = [], []
    for (endpoint, size_kb, concurrency), group in groups.items():
        where = {"endpoint": endpoint, "size_kb": size_kb, "concurrency": concurrency}
        rows.append({**where, **{field: stat([getattr(r, field) for r in group]) for field in fields}})
        if endpoint != "trivial":
            paired = [r.per_core / trivial[(size_kb, concurrency, r.round)].per_core * 100 for r in group]
            ratios.append({**where, "percent": stat(paired)})
    return {
        "benchmark": "webhook", "provenance": "measured",
        "command": " ".join(["python -m hack.bench.webhook", *(a for a in argv if a != "--no-docs")]),
        "date": date, "commit": benchdoc.current_commit(),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}", "rounds": args.rounds,
        "sizes_kb": args.sizes, "concurrency": args.concurrency, "duration_s": args.duration,
        "warmup_s": args.warmup, "log_level": args.log_level,
        "rows": rows, "ratios": ratios, "memory": memory,
        "runs": [{**dataclasses.asdict(r), "per_core": r.per_core} for r in runs],
    }


def report(figures: dict[str, Any]) -> None:
    print(f"# B2 webhook server alone: {figures['machine']}, wrk keep-alive over TLS, {figures['rounds']} interleaved "
          f"round(s) of {figures['duration_s']:g} s per row after {figures['warmup_s']:g} s warm-up, webhook log level "
          f"{figures['log_level']}; median (min-max) over the rounds")
    print("| endpoint | body | c | req/s | p50 ms | p99 ms | server CPU µs/req | req/s per core |")
    print("|---|---|---|---|---|---|---|---|")
    for row in figures["rows"]:
        cells = [show(row["requests_per_s"], 0, sep=True), show(row["p50_ms"]), show(row["p99_ms"]),
                 show(row["cpu_us_per_request"], 0), show(row["per_core"], 0, sep=True)]
        print(f"| {row['endpoint']} | {row['size_kb']} KB | {row['concurrency']} | {' | '.join(cells)} |")
    memory = figures["memory"]
    print(f"\nwebhook RSS: idle {memory['idle_mib']:.1f} MiB ({memory['idle_mib'] * 1.048576:.1f} MB), "
          f"after the runs {memory['end_mib']:.1f} MiB, peak {memory['peak_mib']:.1f} MiB; "
          f"trivial handler idle {memory['trivial_idle_mib']:.1f} MiB")
    print("\nours / trivial, req/s per core of server CPU, paired within each round: median (min-max)")
    for ratio in figures["ratios"]:
        print(f"- {ratio['endpoint']} {ratio['size_kb']} KB c={ratio['concurrency']}: {show(ratio['percent'], 1)} %")


def integers(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--sizes", type=integers, default=[5, 20, 50], help="body sizes in KB (default 5,20,50)")
    parser.add_argument("--concurrency", type=integers, default=[1, 16], help="connections (default 1,16)")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds measured per configuration")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up per configuration")
    parser.add_argument("--log-level", default="info", help="the webhook's log level (info: one line per request)")
    parser.add_argument("--no-docs", action="store_true", help="print only; leave hack/bench/results and docs/ alone")
    args = parser.parse_args()
    ensure_wrk()
    began = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    with tempfile.TemporaryDirectory(prefix="bench-webhook-") as tmp:
        runs, memory = run_all(Path(tmp), args)
    figures = summarize(runs, memory, args, began, sys.argv[1:])
    report(figures)
    if not args.no_docs:
        benchdoc.write_json(benchdoc.RESULTS / "webhook.json", figures)
        benchdoc.rewrite()
        print(f"\nwrote hack/bench/results/webhook.json and the summary of {benchdoc.DOC.name}")


if __name__ == "__main__":
    main()
