"""B3 + B4 + B5 + B6 side by side with the upstream Go operator (github.com/kubeflow/mpi-operator v0.8.2).

``make bench-peer`` builds the Go operator from the Go module proxy (hack/build/build-peer.sh, cached by version,
benchmark only), starts one local control plane (4 kwok nodes x 1000 pods, audit log on) and runs the Go
operator and ``python -m reconciler`` alone in turn, interleaved (the order alternates each round), each at
its defaults (no rate flags) and with raised limits (``--kube-api-qps=1000 --kube-api-burst=1000``):
- B0: the raw pod-create ceiling C_max, once per round, no operator running (the floor W / C_max), of
  scheduling-gated pods and of the exact worker template, scheduled and started (C_sched, the floor W / C_sched);
- B3: POST to all W workers created and to the launcher Job created, W = 1, 64, 512, 1000;
- B4: 200 MPIJobs of 4 workers submitted open loop at 5/s, 10/s, 20/s and 40/s: p50/p99 POST to launcher Job
  created, and the highest of those rates sustained with p99 <= 2 s (raised limits only, by default: at 5 QPS
  the Go operator needs ~400 s per rate);
- B5: API writes of one W=64 job from creation to Succeeded to cleanup, from the audit log;
- B6: RSS idle and with the largest B3 job live, CPU-seconds per 1000 pods created (hack/bench/procstat.py).
It prints the figures and keeps them as JSON while it runs (outside the checkout); at the end it writes the
run's figures to hack/bench/results/peer.json and its per-round measurements to peer-rounds.json (with the date
and commit), PNG plots under docs/img/, and the summary of docs/benchmarks.md from the results files
(hack/bench/doc.py). ``python -m hack.bench.peer --render RESULTS.json [...]`` does the same from saved results
(e.g. hack/bench/results/peer-rounds.json); ``--no-docs`` only prints.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hack.bench import doc as benchdoc
from hack.bench.apiload import ApiLoad
from hack.bench.peer import measure, report, summary
from hack.bench.peer.operators import (
    SETTINGS,
    GoOperator,
    Operator,
    OurOperator,
    our_default_limits,
)
from hack.bench.procstat import ProcessSample, describe_shares
from hack.bench.reconciler import pod_ceiling
from hack.devcluster import LocalCluster, NodePool
from hack.devcluster.audit import audit_flags
from hack.devcluster.operators import PEER_LOCK_NAMESPACE as LOCK_NAMESPACE
from hack.devcluster.operators import REPO_ROOT, build_peer

CRD = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
DOCS = REPO_ROOT / "docs"
IMG = DOCS / "img"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mpijob-operator" / "bench-peer"
NODES, PODS_PER_NODE = 4, 1000


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", type=ints, default=[1, 64, 512, 1000], help="B3 worker counts")
    parser.add_argument("--default-sizes", type=ints, default=None,
                        help="B3 worker counts at defaults, if not --sizes (the Go operator needs ~200 s at W=1000)")
    parser.add_argument("--settings", default="defaults,raised")
    parser.add_argument("--operators", default="go,ours", help="which operators to run (develop with one)")
    parser.add_argument("--b4-jobs", type=int, default=200)
    parser.add_argument("--b4-workers", type=int, default=4)
    parser.add_argument("--b4-rates", default="5,10,20,40")
    parser.add_argument("--b4-settings", default="raised")
    parser.add_argument("--b4-wait", type=float, default=30.0,
                        help="seconds after the last B4 POST to wait for missing launchers (then censored)")
    parser.add_argument("--b5-workers", type=int, default=64)
    parser.add_argument("--b5-rounds", type=int, default=99, help="run B5 in the first N rounds only")
    parser.add_argument("--skip", default="", help="comma-separated: b0,b3,b4,b5")
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="idle period before the idle RSS sample")
    parser.add_argument("--peer-version", default="v0.8.2")
    parser.add_argument("--results", type=Path, default=None, help="JSON results file (default: in the cache)")
    parser.add_argument("--no-docs", action="store_true", help="print only; leave docs/ alone")
    parser.add_argument("--img-dir", type=Path, default=IMG)
    parser.add_argument("--doc", type=Path, default=DOCS / "benchmarks.md", help="the page holding the summary")
    parser.add_argument("--note", action="append", default=[], help="a note kept in the results file")
    parser.add_argument("--render", type=Path, nargs="+", default=None,
                        help="no measurement: the results files, plots and summary from these saved results")
    return parser.parse_args(argv)


def new_results(args: argparse.Namespace) -> dict[str, Any]:
    settings = [s for s in args.settings.split(",") if s]
    qps, burst = our_default_limits()
    sizes = {s: (args.default_sizes if s == "defaults" and args.default_sizes else args.sizes) for s in settings}
    skip = set(args.skip.split(","))
    return {
        "meta": {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": benchdoc.current_commit(),
            "rounds": args.rounds,
            "settings": settings, "sizes": {s: [] if "b3" in skip else sizes[s] for s in settings},
            "b4_rates": [] if "b4" in skip else [float(r) for r in args.b4_rates.split(",") if r],
            "b4_settings": [s for s in args.b4_settings.split(",") if s], "b4_jobs": args.b4_jobs,
            "b4_workers": args.b4_workers, "b4_wait": args.b4_wait, "b5_workers": args.b5_workers,
            "peer_version": args.peer_version,
            "nodes": NODES, "pods_per_node": PODS_PER_NODE, "our_default_qps": qps, "our_default_burst": burst,
            "flags": {s: {"go": " ".join(SETTINGS[s].flags), "ours": " ".join(SETTINGS[s].flags)} for s in settings},
            "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}",
            "argv": sys.argv[1:], "notes": list(args.note),
        },
        "b0": [], "runs": [],
    }


def save(results: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1))
    tmp.replace(path)


async def run_operator(load: ApiLoad, make: Callable[[str], Operator], setting: str, round_: int,  # noqa: PLR0915
                       args: argparse.Namespace, results: dict[str, Any], audit_log: Path) -> dict[str, Any]:
    """One operator at one setting: B3 (with the idle sample before it), each B4 rate and B5, each phase on a
    fresh process (a backlog in one phase's work queue must not slow the next)."""
    meta = results["meta"]
    kind = make("probe").kind
    tag = f"{kind}-{setting[:3]}-r{round_}"
    run: dict[str, Any] = {"operator": kind, "setting": setting, "round": round_, "b3": [], "b4": []}
    say(f"== round {round_}: {report.NAMES[kind]}, {setting}")
    began = time.perf_counter()

    async def phase(name: str, body: Callable[[Operator], Awaitable[None]]) -> None:
        operator = make(name)
        run.setdefault("argv", [Path(operator.argv[0]).name, *(a for a in operator.argv[1:]
                                                                if not a.lstrip("-").startswith("kubeConfig"))])
        operator.start()
        try:
            ready = await measure.warm_up(load, f"warm-{tag}-{name}", operator.pid, operator.alive, 120)
            run.setdefault("first_job_seconds", ready)
            await body(operator)
            end = ProcessSample.of(operator.pid)
            run.setdefault("phases", {})[name] = {"rss_kb": end.rss_kb, "peak_rss_kb": end.peak_rss_kb,
                                                  "cpu": end.cpu_seconds}
        except BaseException:
            say(f"  {operator.name} log tail:\n{operator.tail()}")
            raise
        finally:
            operator.stop()
            # The next process must not wait out this one's Lease (15 s): remove it.
            await load.request("DELETE", f"/apis/coordination.k8s.io/v1/namespaces/{LOCK_NAMESPACE}/leases")

    def b3(workers: int, first: bool) -> Callable[[Operator], Awaitable[None]]:
        async def body(operator: Operator) -> None:
            if first:
                say(f"  first launcher Job {run['first_job_seconds']:.2f} s after exec")
                await asyncio.sleep(args.idle_seconds)  # the benchmark's idle period
                idle = ProcessSample.of(operator.pid)
                run["idle_rss_kb"] = idle.rss_kb
                say(f"  idle RSS {idle.rss_kb / 1024:.1f} MiB")
            await asyncio.sleep(2)  # a full client token bucket (10 at 5/s) for the Go operator at its defaults
            limit = 60 + workers * (0.5 if setting == "defaults" else 0.2)
            m = await measure.one_job(load, f"b3-{tag}-w{workers}", workers, operator.pid, limit)
            run["b3"].append(m)
            say(f"  B3 W={workers}: all workers {m['ttac']:.3f} s, launcher {m['launcher']:.3f} s, "
                f"CPU {m['cpu']:.2f} s, RSS {m['rss_kb'] / 1024:.1f} MiB, watches reopened {m['watch_reopened']}")
            say(f"    CPU meanwhile: {describe_shares(m['cpu_percent'])}")

        return body

    def b4(rate: float) -> Callable[[Operator], Awaitable[None]]:
        async def body(_: Operator) -> None:
            m = await measure.many_jobs(load, f"b4-{tag}-q{rate:g}", args.b4_jobs, args.b4_workers, rate,
                                        limit=args.b4_wait)
            run["b4"].append(m)
            every = [*m["latencies"], *m["censored"]]
            say(f"  B4 {args.b4_jobs} jobs at {rate:g}/s: p50 {report.pct(every, 50):.3f} s, p99 "
                f"{report.pct(every, 99):.3f} s, {len(m['latencies'])} launchers in {m['span']:.1f} s, "
                f"{m['missing']} not created {args.b4_wait:g} s after the last POST, {m['errors']} POST errors")

        return body

    async def b5(_: Operator) -> None:
        m = await measure.writes_of_one_job(load, f"b5-{tag}", args.b5_workers, audit_log, limit=600)
        run["b5"] = m
        say(f"  B5 W={args.b5_workers}: {sum(m['writes'].values())} writes {m['writes']}, "
            f"by user agent {m['user_agents']}")

    # Each B3 job on a fresh process too: the Go operator sends every informer event through its work queue's
    # token bucket (10/s, burst 100), so the events of a W=512 job delay the first sync of the next job by
    # minutes in the same process.
    for index, workers in enumerate(meta["sizes"][setting]):
        await phase(f"b3-w{workers}", b3(workers, first=index == 0))
    if setting in meta["b4_settings"]:
        for rate in meta["b4_rates"]:
            await phase(f"b4-{rate:g}", b4(rate))
    if "b5" not in args.skip.split(",") and round_ < args.b5_rounds:
        await phase("b5", b5)
    run["wall"] = time.perf_counter() - began
    return run


def say(text: str) -> None:
    print(text, flush=True)


def measure_all(args: argparse.Namespace, results: dict[str, Any], results_path: Path) -> None:
    binary = build_peer(args.peer_version) if "go" in args.operators else None
    kinds = [k for k in args.operators.split(",") if k]
    with tempfile.TemporaryDirectory(prefix="bench-peer-") as tmp_name:
        tmp = Path(tmp_name)
        flags, audit_log = audit_flags(tmp / "audit")
        # Batched (off the request path), flushed within a second so that B5 can count soon after a job.
        flags = [f.replace("--audit-log-mode=blocking", "--audit-log-mode=batch") for f in flags]
        flags.append("--audit-log-batch-max-wait=1s")
        with LocalCluster(nodes=NodePool(count=NODES, pods=str(PODS_PER_NODE)), crds=[CRD], apiserver_flags=flags,
                          verbose=False) as cluster:
            results["meta"]["machine"] += f", control plane {cluster.bin_dir.parent.name}"

            def maker(kind: str, setting: str, round_: int) -> Callable[[str], Operator]:
                def make(phase: str) -> Operator:
                    tag = f"{setting}-r{round_}-{phase}"
                    if kind == "go":
                        assert binary is not None
                        return GoOperator(binary, cluster, tmp, SETTINGS[setting], tag)
                    return OurOperator(cluster, tmp, SETTINGS[setting], tag)

                return make

            async def everything() -> None:
                async with ApiLoad(cluster.server, cluster.ca_file, cluster.admin_cert, cluster.admin_key) as load:
                    await measure.create_namespace(load, LOCK_NAMESPACE)
                    for round_ in range(args.rounds):
                        if "b0" not in args.skip.split(","):
                            rate = await pod_ceiling(load)
                            scheduled = await pod_ceiling(load, scheduled=True)
                            results["b0"].append({"round": round_, "rate": rate, "scheduled_rate": scheduled})
                        order = kinds if round_ % 2 == 0 else kinds[::-1]
                        for kind in order:
                            for setting in results["meta"]["settings"]:
                                run = await run_operator(load, maker(kind, setting, round_), setting, round_,
                                                         args, results, audit_log)
                                results["runs"].append(run)
                                save(results, results_path)

            try:
                asyncio.run(everything())
            finally:
                keep_logs(tmp, results_path.with_suffix(".logs"))


def keep_logs(tmp: Path, target: Path) -> None:
    """The operators' logs, beside the results file."""
    for log in (p for p in tmp.glob("*/*.log") if p.parent.name != "audit"):
        (target / log.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(log, target / log.parent.name / log.name)


LOCAL_OPTIONS = ("--results", "--img-dir", "--doc", "--no-docs", "--note", "--render")


def public_args(argv: list[str]) -> list[str]:
    """The command line without the options naming local files (the docs must not name this machine's paths)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg.split("=", 1)[0] in LOCAL_OPTIONS:
            skip = "=" not in arg and arg != "--no-docs"
        else:
            out.append(arg)
    return out


def merge(files: list[Path]) -> dict[str, Any]:
    """Several results files as one: each file's runs keep their own B0 (``source``) and rounds (renumbered by
    100 a source, so that they pair among themselves); a file merged before keeps its sources apart."""
    merged: dict[str, Any] | None = None
    offset = 0
    for path in files:
        data = json.loads(path.read_text())
        items = [*data["runs"], *data["b0"]]
        for item in items:
            item["round"] += 100 * offset
            item["source"] = offset + item.get("source", 0)
        offset = 1 + max((item["source"] for item in items), default=offset)
        command = " ".join(["python -m hack.bench.peer", *public_args(data["meta"].get("argv", []))])
        if merged is None:
            merged = data
            merged["meta"]["commands"] = [command]
            continue
        meta = merged["meta"]
        meta["commands"].append(command)
        meta["date"] = f"{meta['date']} and {data['meta']['date']}"
        meta["commit"] = f"{meta.get('commit', 'unrecorded')} and {data['meta'].get('commit', 'unrecorded')}"
        meta["rounds"] = f"{meta['rounds']}+{data['meta']['rounds']}"
        for setting in data["meta"]["settings"]:
            if setting not in meta["settings"]:
                meta["settings"].append(setting)
                meta["flags"][setting] = data["meta"]["flags"][setting]
            meta["sizes"][setting] = sorted(set(meta["sizes"].get(setting, [])) | set(data["meta"]["sizes"][setting]))
        meta["b4_rates"] = sorted(set(meta["b4_rates"]) | set(data["meta"]["b4_rates"]))
        meta["b4_settings"] = sorted(set(meta["b4_settings"]) | set(data["meta"]["b4_settings"]))
        meta["notes"] = [*meta.get("notes", []), *data["meta"].get("notes", [])]
        merged["b0"].extend(data["b0"])
        merged["runs"].extend(data["runs"])
    assert merged is not None
    return merged


def render(results: dict[str, Any], args: argparse.Namespace, command: str) -> None:
    figures = summary.summarize(results, results["meta"].get("commit", "unrecorded"), command, [])
    print("\n" + summary.full_text(figures))
    if args.no_docs:
        return
    images = [report.plot_summary(results, args.img_dir / "peer-summary.png"),
              report.plot_ttac(results, args.img_dir / "peer-b3-ttac.png")]
    cdf = report.plot_b4(results, args.img_dir / "peer-b4-cdf.png")
    if cdf is not None:
        images.append(cdf)
    figures["plots"] = [Path(os.path.relpath(p.resolve(), REPO_ROOT)).as_posix() for p in images]
    rounds = {**results, "meta": {**results["meta"], "argv": public_args(results["meta"].get("argv", []))}}
    benchdoc.write_json(summary.ROUNDS, rounds, places=4)
    benchdoc.write_json(summary.PEER, figures)
    benchdoc.rewrite(args.doc)
    written = [os.path.relpath(p, REPO_ROOT) for p in (summary.PEER, summary.ROUNDS, *images)]
    print(f"\nwrote {', '.join(written)} and the summary of {args.doc.name}")


def main() -> None:
    args = parse_args()
    if args.render:
        results = merge(args.render)
        results["meta"]["notes"] = [*results["meta"].get("notes", []), *args.note]
        render(results, args, "; ".join(results["meta"]["commands"]))
        return
    results = new_results(args)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    results_path = args.results or CACHE / f"results-{stamp}.json"
    say(f"results: {results_path}")
    try:
        measure_all(args, results, results_path)
    finally:
        save(results, results_path)
        say(f"results kept in {results_path}")
    render(results, args, " ".join(["python -m hack.bench.peer", *public_args(sys.argv[1:])]))


if __name__ == "__main__":
    main()
