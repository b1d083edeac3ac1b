"""``python -m hack.bench.scale``: see hack/bench/scale/__init__.py."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hack.bench import doc as benchdoc
from hack.bench import scale
from hack.bench.apiload import ApiLoad
from hack.bench.peer.measure import create_namespace, warm_up
from hack.bench.peer.operators import RAISED_LIMITS, GoOperator, Operator, OurOperator, Setting
from hack.bench.procstat import ProcessSample
from hack.bench.scale.audit import KCM_AGENT, OPERATOR_AGENT, audit_flags
from hack.bench.scale.plots import plot_per_pod
from hack.bench.scale.scenarios import floor_run, long_names, operator_run, overflow_run
from hack.devcluster import LocalCluster, NodePool
from hack.devcluster.components import KCM_DEFAULT_LIMITS, KCM_RAISED_LIMITS
from hack.devcluster.operators import PEER_LOCK_NAMESPACE as LOCK_NAMESPACE
from hack.devcluster.operators import REPO_ROOT, OperatorWebhook, build_peer

CRD = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
RESULTS = benchdoc.RESULTS / "scale.json"
BACKENDS_RESULTS = benchdoc.RESULTS / "scale-backends.json"  # --compare-backends
FLOORS_RESULTS = benchdoc.RESULTS / "scale-floors.json"  # --compare-floors
PLOT = REPO_ROOT / "docs" / "img" / "scale-per-pod.png"
PODS_PER_NODE = 1000
CPU_METHOD = ("utime+stime of /proc/<pid>/stat (every thread of the process) from the first MPIJob POST until "
              "every pod is Running and the operator idle again (under 0.05 CPU-s in 1 s)")
KINDS = ("go", "ours", "floor", "floor-service", "ours-indexed")
DEFAULT_KINDS = ("go", "ours", "floor", "floor-service")
# the raw client's runs, and whether each job's Service is created before its pods
FLOORS = {"floor": False, "floor-service": True}
SHORT = {"ours-indexed": "oidx", "floor-service": "fsvc"}  # in namespace names
# ours with every job's workers the pods of one Indexed Job, made by kube-controller-manager's Job controller
INDEXED_SETTING = Setting("raised", (*RAISED_LIMITS.flags, "--default-worker-backend=IndexedJob"))
KCM_LIMITS = {"default": KCM_DEFAULT_LIMITS, "raised": KCM_RAISED_LIMITS}


def worker_creator(kind: str) -> str:
    """The user agent (prefix) of whoever creates the workers: the Job controller's for ours-indexed."""
    return KCM_AGENT if kind == "ours-indexed" else OPERATOR_AGENT


def results_path(args: argparse.Namespace) -> Path:
    return BACKENDS_RESULTS if args.compare_backends else FLOORS_RESULTS if args.compare_floors else RESULTS


def say(text: str) -> None:
    print(text, flush=True)


def describe(kind: str, name: str, run: dict[str, Any]) -> str:
    if name == "overflow":
        how = (f"POST answered {run['post_code']}: {run.get('post_message', '')}" if run["post_code"] != 201 else
               f"admitted; after {run['seconds_watched']} s: {run['pods']} pods, conditions "
               f"{[c['type'] + ' ' + str(c['reason']) for c in run['conditions']]}, warnings {run['warnings'][:2]}, "
               f"log: {run['log_line'][:200]}")
        return f"{kind} overflow ({run.get('variant', '')}) {run['workers']} workers: {how}"
    head = (f"{kind} {name} {run['jobs']}x{run['workers']}: {run['pods']} pods, created {run['created']} (409: "
            f"{run['already_exists']}), all created {run['all_created']:.1f} s, all Running {run['all_running']:.1f} s")
    if kind in FLOORS:
        slices = f", EndpointSlices {run['endpoint_slices']} ({run['endpoints']} endpoints)" if FLOORS[kind] else ""
        return f"{head}, {run['creates_per_second']:.0f} creates/s{slices}"
    top = ", ".join(f"{k} {v}" for k, v in sorted(run["requests"].items(), key=lambda kv: -kv[1])[:6])
    return (f"{head}, found {run['workers_found']}, CPU {run['cpu']:.1f} s ({run['cpu_per_1000_pods']:.2f} s per "
            f"1,000 pods), peak RSS {run['peak_rss_kb'] / 1024:.1f} MiB, ConfigMap {run['configmap_writes']} writes "
            f"{run['configmap_bytes']:,} bytes, EndpointSlices {run['endpoint_slices']} ({run['endpoints']} "
            f"endpoints); requests: {top}")


def scenarios_of(args: argparse.Namespace) -> list[tuple[str, int, int]]:
    """(name, jobs, workers) in the order they run: one job per size, the many jobs, the overflow."""
    wanted = args.scenarios.split(",")
    found = [("one", 1, int(w)) for w in args.workers.split(",") if w] if "one" in wanted else []
    if "many" in wanted:
        found.append(("many", args.jobs, args.job_workers))
    if "overflow" in wanted:
        found.append(("overflow", 1, args.overflow_workers))
    return found


class Session:
    """One control plane, the load generator's client and the results file, for every run of the benchmark."""

    def __init__(self, args: argparse.Namespace, results: dict[str, Any], cluster: LocalCluster, tmp: Path,
                 audit_log: Path, load: ApiLoad, binary: Path | None, kcm_limits: str = "raised") -> None:
        self.args, self.results, self.cluster, self.tmp = args, results, cluster, tmp
        self.audit_log, self.load, self.binary = audit_log, load, binary
        self.kcm_limits = kcm_limits

    def components_cpu(self) -> dict[str, float]:
        """The CPU-seconds so far of each control-plane component (kube-apiserver, etcd, kube-scheduler, ...)."""
        return {process.name: ProcessSample.of(process.pid).cpu_seconds for process in self.cluster.processes
                if process.running()}

    def operator(self, kind: str, tag: str) -> Operator:
        if kind == "go":
            assert self.binary is not None
            return GoOperator(self.binary, self.cluster, self.tmp, RAISED_LIMITS, tag)
        if kind == "ours-indexed":
            return OurOperator(self.cluster, self.tmp, INDEXED_SETTING, f"indexed-{tag}")
        return OurOperator(self.cluster, self.tmp, RAISED_LIMITS, tag)

    def keep(self, run: dict[str, Any], **about: Any) -> None:
        run.update(about)
        if self.args.compare_backends:
            run["kcm_limits"] = self.kcm_limits
        self.results["runs"].append(run)
        say(describe(about["operator"], about["scenario"], run))
        if not self.args.no_docs:  # kept as it goes: a run cut short keeps what it measured
            benchdoc.write_json(results_path(self.args), self.results, places=3)

    async def run(self, kind: str, name: str, jobs: int, workers: int, round_: int, last: bool = False) -> None:
        """One run; ``last`` (the last on this control plane, which is stopped next) leaves its namespace in place
        under --compare-backends: 10,000 pods of an Indexed Job take the Job controller minutes to let go."""
        tag = f"{name}-{workers}-{self.kcm_limits}-r{round_}"
        # as long as every other kind's: the namespace is in every hostfile line, so in the ConfigMap's size
        namespace = f"{name}-{workers}-{SHORT.get(kind, kind)}-r{round_}"
        if kind in FLOORS:
            if name != "overflow":
                run = await floor_run(self.load, self.audit_log, namespace, jobs, workers, self.args.limit,
                                      services=FLOORS[kind], components=self.components_cpu)
                self.keep(run, operator=kind, scenario=name, round=round_)
            return
        if name == "overflow":
            await self.overflow(kind, workers, round_)
            return
        operator = self.operator(kind, tag)
        operator.start()
        try:
            await warm_up(self.load, f"warm-{kind}-{tag}", operator.pid, operator.alive, 120)
            run = await operator_run(self.load, operator, self.audit_log, namespace, jobs, workers, self.args.limit,
                                     creator=worker_creator(kind), hang_workers=self.args.compare_backends,
                                     clean_up=not (last and self.args.compare_backends),
                                     components=self.components_cpu)
        finally:
            operator.stop()
        self.keep(run, operator=kind, scenario=name, round=round_)

    async def overflow(self, kind: str, workers: int, round_: int) -> None:
        """The Go operator alone; ours with its webhook (the POST is refused), then without (the reconciler)."""
        variants = ["webhook", "reconciler"] if kind == "ours" else ["controller"]
        for variant in variants:
            namespace, name = long_names(workers)
            namespace = f"{namespace[:-4]}{kind[0]}{variant[0]}{round_:02d}"
            operator = self.operator(kind, f"overflow-{variant}-r{round_}")
            webhook = OperatorWebhook(self.cluster, self.tmp / f"webhook-r{round_}") if variant == "webhook" else None
            operator.start()
            try:
                if webhook is not None:
                    webhook.start()
                    webhook.wait_ready()
                    await asyncio.to_thread(webhook.register)
                await warm_up(self.load, f"warm-{kind}-overflow-{variant}-r{round_}", operator.pid, operator.alive,
                              120)
                run = await overflow_run(self.load, namespace, name, workers, self.args.overflow_watch,
                                         operator.log)
            finally:
                if webhook is not None:
                    await asyncio.to_thread(webhook.unregister)
                    webhook.stop()
                operator.stop()
            self.keep(run, operator=kind, scenario="overflow", variant=variant, round=round_)


def measure(args: argparse.Namespace, results: dict[str, Any]) -> None:
    kinds = [k for k in args.operators.split(",") if k]
    if unknown := set(kinds) - set(KINDS):
        raise SystemExit(f"--operators: unknown {sorted(unknown)}; choose from {', '.join(KINDS)}")
    limits = [k for k in args.kcm_limits.split(",") if k]
    if unknown := set(limits) - set(KCM_LIMITS):
        raise SystemExit(f"--kcm-limits: unknown {sorted(unknown)}; choose from {', '.join(KCM_LIMITS)}")
    binary = build_peer(args.peer_version) if "go" in kinds else None
    scenarios = scenarios_of(args)
    largest = max(jobs * (workers + 1) for _, jobs, workers in scenarios)  # the Go operator creates the overflow's pods
    nodes = math.ceil(largest / PODS_PER_NODE) + 1
    results["nodes"] = f"{nodes} kwok nodes of {PODS_PER_NODE} pods"
    for kcm_limits in limits:  # a control plane each, one after the other
        on_one_control_plane(args, results, kinds, scenarios, nodes, binary, kcm_limits)


def on_one_control_plane(args: argparse.Namespace, results: dict[str, Any], kinds: list[str],
                         scenarios: list[tuple[str, int, int]], nodes: int, binary: Path | None,
                         kcm_limits: str) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp_name:
        tmp = Path(tmp_name)
        flags, audit_log = audit_flags(tmp / "audit")
        with LocalCluster(nodes=NodePool(count=nodes, pods=str(PODS_PER_NODE)), crds=[CRD], apiserver_flags=flags,
                          kcm_client_limits=KCM_LIMITS[kcm_limits], verbose=False) as cluster:

            async def everything() -> None:
                async with ApiLoad(cluster.server, cluster.ca_file, cluster.admin_cert, cluster.admin_key) as load:
                    await create_namespace(load, LOCK_NAMESPACE)
                    session = Session(args, results, cluster, tmp, audit_log, load, binary, kcm_limits)
                    runs = [(kind, name, jobs, workers, round_) for round_ in range(args.rounds)
                            for name, jobs, workers in scenarios
                            for kind in (kinds if round_ % 2 == 0 else kinds[::-1])]
                    for index, run in enumerate(runs):
                        await session.run(*run, last=index == len(runs) - 1)

            asyncio.run(everything())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=scale.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--operators", default=",".join(DEFAULT_KINDS),
                        help="of go, ours, floor (the raw client), floor-service (the raw client, each job's Service "
                             "first), ours-indexed (ours, the IndexedJob worker backend)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", default="one,many,overflow",
                        help="one (one job of each --workers), many (--jobs jobs), overflow (a job too large)")
    parser.add_argument("--workers", default="1000,10000", help="the sizes of the one-job scenario")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--job-workers", type=int, default=4)
    parser.add_argument("--overflow-workers", type=int, default=6000)
    parser.add_argument("--overflow-watch", type=float, default=900.0,
                        help="seconds at most to watch an admitted job that cannot fit (until it fails or the "
                             "operator logs the ConfigMap refused)")
    parser.add_argument("--limit", type=float, default=1800.0, help="seconds a scenario may take to be Running")
    parser.add_argument("--peer-version", default="v0.8.2")
    parser.add_argument("--kcm-limits", default="raised",
                        help="kube-controller-manager's client limits, a control plane each in turn: default (its "
                             "own 20 QPS, burst 30), raised (200, 400), or default,raised")
    comparison = parser.add_mutually_exclusive_group()
    comparison.add_argument("--compare-backends", action="store_true",
                            help="the worker backends side by side: results in scale-backends.json, its own summary")
    comparison.add_argument("--compare-floors", action="store_true",
                            help="ours beside the floor with and without each job's Service, and the control plane's "
                                 "CPU by component: results in scale-floors.json, its own summary")
    parser.add_argument("--add", action="store_true",
                        help="with --compare-backends: keep the runs already in scale-backends.json and add these")
    parser.add_argument("--note", action="append", default=[], help="a note kept in the results file")
    parser.add_argument("--no-docs", action="store_true", help="print only; leave the results file and docs alone")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    results: dict[str, Any] = {
        "benchmark": "scale", "provenance": "measured", "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": benchdoc.current_commit(), "command": " ".join(["python -m hack.bench.scale", *sys.argv[1:]]),
        "rounds": args.rounds, "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}",
        "operator_flags": " ".join(RAISED_LIMITS.flags), "peer_version": args.peer_version,
        "control_plane": control_plane(args), "cpu_method": CPU_METHOD, "notes": args.note, "runs": []}
    if args.compare_floors:
        results["benchmark"] = "scale-floors"
    if args.compare_backends:
        results["benchmark"] = "scale-backends"
        results["load_average"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        if args.add and BACKENDS_RESULTS.exists():
            results = added_to(json.loads(BACKENDS_RESULTS.read_text(encoding="utf-8")), results)
    measure(args, results)
    if args.no_docs:
        return
    path = results_path(args)
    if args.compare_backends:
        after = " ".join(f"{x:.2f}" for x in os.getloadavg())
        results["load_average_after"] = f"{results['load_average_after']}; then {after}" if results.get(
            "load_average_after") else after
    benchdoc.write_json(path, results, places=3)
    if path == RESULTS:
        plot_per_pod(results, PLOT)
    benchdoc.rewrite()
    say(f"wrote {path.relative_to(REPO_ROOT)}, the summary of docs/benchmarks.md"
        + (f" and {PLOT.relative_to(REPO_ROOT)}" if path == RESULTS else ""))


def added_to(before: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """``now`` (no runs yet) continuing ``before``: its runs kept, the commands, load averages, control planes and
    notes of both, the date and commit of the latest."""
    def both(key: str) -> str:
        return f"{before[key]}; then {now[key]}" if before.get(key) and before[key] != now[key] else now[key]

    return {**now, "command": both("command"), "control_plane": both("control_plane"),
            "load_average": both("load_average"), "load_average_after": before.get("load_average_after", ""),
            "notes": [*before.get("notes", []), *(n for n in now["notes"] if n not in before.get("notes", []))],
            "runs": list(before["runs"])}


def control_plane(args: argparse.Namespace) -> str:
    limits = [k for k in args.kcm_limits.split(",") if k]
    if limits == ["raised"]:
        return "kube-scheduler and kube-controller-manager with raised client limits (200 QPS, 400 burst)"
    shown = {"default": "its defaults (20 QPS, 30 burst)", "raised": "raised (200 QPS, 400 burst)"}
    return ("kube-scheduler with raised client limits (200 QPS, 400 burst); kube-controller-manager's: "
            + ", then ".join(shown[k] for k in limits) + " (a control plane each)")


if __name__ == "__main__":
    main()
