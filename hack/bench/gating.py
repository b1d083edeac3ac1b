"""Launcher gating's cost on the real node (issue 35): how much later than the ideal does a ``WaitForWorkersReady``
launcher start, the ideal being a launcher created the instant the last worker turned Ready?

N Open MPI pi jobs (examples/pi-openmpi.yaml with ``launcherCreationPolicy: WaitForWorkersReady`` and the worker
readinessProbe of examples/pi-wait-for-workers.yaml, a tcpSocket probe on sshd's port; 2 workers) run on the real
node (hack/devcluster/realnode.py: kubelet, containerd, CoreDNS; our operator deployed from its images), a few at a
time: every other one created suspended and resumed once the operator has marked it Suspended (as Kueue does), the
others created running. For each job:
- (a) gating added: launcher pod created minus the last worker Ready;
- (b) launcher pod created minus the MPIJob created (or resumed);
- (c) the launcher's restarts (container restarts plus launcher pods beyond the first): must be 0.
Kubernetes timestamps (pod conditions' lastTransitionTime, creationTimestamp, the MPIJob's conditions) have 1 s
resolution, so each figure is also taken from finer sources: the arrival times of the benchmark's own watch events
(a worker's first event with Ready=True, the launcher pod's first event, the launcher Job's first event with
``suspend`` unset, each worker's first ready endpoint in an EndpointSlice: its DNS name) and of the answers to its
own POST and resume PATCH. Both ends of (a) come through the same pod
watch, so its lag cancels out. The reconciler's ``mpi_operator_launcher_gated_seconds`` (count and sum, scraped
through the API server's pod proxy before and after) is kept as a cross-check: it times the whole wait (from
``WaitingForWorkers`` to the release), from its own 1 s status timestamps.

Percentiles are linear between the closest ranks (numpy's default); with N = 20 the p99 lies between the two
largest values. Usage: ``python -m hack.bench.gating [--jobs 20] [--parallel 3]``; needs Linux and root, waits for
the machine's real node while another run holds it; writes hack/bench/results/gating.json, the summary of
docs/benchmarks.md and the launcher-gating rows of docs/kueue.md's Figures table.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from hack.bench import doc as benchdoc
from hack.bench.apiload import ApiLoad
from hack.devcluster.binaries import REPO_ROOT, find_bin_dir
from hack.devcluster.operator_deploy import NAMESPACE as OPERATOR_NAMESPACE
from hack.devcluster.operator_deploy import RECONCILER, deploy, operator_image_archives
from hack.devcluster.realnode import RealNodeCluster, image_archives, node_bin_dir, unavailable

JSON = dict[str, Any]
RESULTS = benchdoc.RESULTS / "gating.json"
KUEUE_DOC = REPO_ROOT / "docs" / "kueue.md"
EXAMPLE = REPO_ROOT / "examples" / "pi-openmpi.yaml"
PROBE_EXAMPLE = REPO_ROOT / "examples" / "pi-wait-for-workers.yaml"
NAMESPACE = "bench-gating"
JOB_NAME = "training.kubeflow.org/job-name"
JOB_ROLE = "training.kubeflow.org/job-role"
METRIC = "mpi_operator_launcher_gated_seconds"
# requests under the limits, so that a few jobs (3 pods each) fit the node's 2 CPUs at once
RESOURCES = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "1Gi"}}
WATCH_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_read=None)


# ---- the pure part: one job's spans and the figures of a run


@dataclass(frozen=True)
class JobTimes:
    """What the benchmark saw of one job. ``*_seen`` are the benchmark's wall clock (watch events' and answers'
    arrival), ``*_at`` the API's RFC 3339 timestamps (1 s)."""

    name: str
    resumed: bool  # created suspended, then resumed by the benchmark
    start_seen: float  # the POST (or the resume PATCH) answered
    ready_seen: list[float]  # each worker's first watch event with Ready=True
    released_seen: float | None  # the launcher Job's first watch event without spec.suspend (released or created so)
    published_seen: float | None  # the last worker's first appearance, ready, in an EndpointSlice (its DNS name)
    launcher_seen: float  # the first launcher pod's first watch event
    start_at: str  # the MPIJob's creationTimestamp, or its Suspended=False condition's lastTransitionTime
    ready_at: list[str]  # each worker's Ready lastTransitionTime, when first seen Ready
    launcher_at: str  # the first launcher pod's creationTimestamp
    launcher_pods: int
    restarts: int  # container restarts of the launcher pods
    outcome: str


def parse(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def spans(job: JobTimes) -> dict[str, float]:
    """One job's spans in seconds: ``added`` (a) and ``to_launcher`` (b) from the watch (``*_api``: from the API's
    timestamps); from the last worker Ready to the launcher Job released (``release``) and to every worker in the
    Service's EndpointSlices (``published``), seen by the watches."""
    last_ready, last_ready_at = max(job.ready_seen), max(parse(s) for s in job.ready_at)
    found = {"added": job.launcher_seen - last_ready, "added_api": parse(job.launcher_at) - last_ready_at,
             "to_launcher": job.launcher_seen - job.start_seen,
             "to_launcher_api": parse(job.launcher_at) - parse(job.start_at)}
    if job.released_seen is not None:
        found["release"] = job.released_seen - last_ready
    if job.published_seen is not None:
        found["published"] = job.published_seen - last_ready
    return found


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0-100), linear between the closest ranks (numpy's default)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values: list[float]) -> JSON:
    return {"p50": percentile(values, 50), "p99": percentile(values, 99), "min": min(values), "max": max(values),
            "n": len(values)}


def figures(jobs: list[JobTimes]) -> JSON:
    """The run's figures: each span's p50/p99/min/max over every job, over the resumed ones and over those created
    running; the launcher restarts and extra pods in total; the outcomes."""
    groups = {"all": jobs, "resumed": [j for j in jobs if j.resumed], "created": [j for j in jobs if not j.resumed]}
    found: JSON = {}
    for group, members in groups.items():
        per_job = [spans(j) for j in members]
        keys = sorted({k for s in per_job for k in s})
        found[group] = {k: summary([s[k] for s in per_job if k in s]) for k in keys} if members else {}
    found["restarts"] = sum(j.restarts for j in jobs)
    found["extra_launcher_pods"] = sum(max(j.launcher_pods - 1, 0) for j in jobs)
    found["outcomes"] = {o: sum(j.outcome == o for j in jobs) for o in sorted({j.outcome for j in jobs})}
    return found


def metric_delta(before: dict[str, float], after: dict[str, float]) -> JSON:
    """The reconciler's gated-seconds histogram over the run: count, sum and mean of the waits it timed."""
    count = after.get("count", 0.0) - before.get("count", 0.0)
    total = after.get("sum", 0.0) - before.get("sum", 0.0)
    return {"count": count, "sum": total, "mean": total / count if count else None}


def metric_values(text: str) -> dict[str, float]:
    """``count`` and ``sum`` of the gated-seconds histogram in a Prometheus text exposition."""
    found = {}
    for line in text.splitlines():
        for suffix in ("count", "sum"):
            if line.startswith(f"{METRIC}_{suffix} "):
                found[suffix] = float(line.split()[1])
    return found


# ---- the job, and what the watches see


def gated_pi(name: str, suspended: bool) -> JSON:
    """examples/pi-openmpi.yaml named ``name``, waiting for its workers behind the readiness probe of
    examples/pi-wait-for-workers.yaml, created suspended or not, with requests low enough for a few at once."""
    job: JSON = yaml.safe_load(EXAMPLE.read_text())
    probe_job = yaml.safe_load(PROBE_EXAMPLE.read_text())
    probe = probe_job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["readinessProbe"]
    job["metadata"] = {"name": name}
    spec = job["spec"]
    spec["launcherCreationPolicy"] = "WaitForWorkersReady"
    spec["runPolicy"].pop("ttlSecondsAfterFinished", None)
    spec["runPolicy"]["suspend"] = suspended
    for replica in spec["mpiReplicaSpecs"].values():
        container = replica["template"]["spec"]["containers"][0]
        container["resources"] = RESOURCES
        container["imagePullPolicy"] = "IfNotPresent"
    spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["readinessProbe"] = probe
    return job


def is_true(obj: JSON, kind: str) -> JSON | None:
    found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind]
    return found[0] if found and found[0].get("status") == "True" else None


@dataclass
class Seen:
    """Everything the watches saw, by object name, with the arrival time of the first event that showed it."""

    pods: dict[str, JSON] = field(default_factory=dict)  # the latest object
    pod_first: dict[str, float] = field(default_factory=dict)
    ready: dict[str, tuple[float, str]] = field(default_factory=dict)  # worker -> (seen, lastTransitionTime)
    restarts: dict[str, int] = field(default_factory=dict)
    released: dict[str, float] = field(default_factory=dict)  # launcher Job -> seen without suspend
    published: dict[str, float] = field(default_factory=dict)  # pod -> seen ready with a hostname in an EndpointSlice
    mpijobs: dict[str, JSON] = field(default_factory=dict)

    def pod(self, obj: JSON, at: float) -> None:
        name = obj["metadata"]["name"]
        self.pods[name] = obj
        self.pod_first.setdefault(name, at)
        ready = is_true(obj, "Ready")
        if ready and name not in self.ready:
            self.ready[name] = (at, ready["lastTransitionTime"])
        count = sum(s.get("restartCount", 0) for s in (obj.get("status") or {}).get("containerStatuses") or [])
        self.restarts[name] = max(self.restarts.get(name, 0), count)

    def job(self, obj: JSON, at: float) -> None:
        if not (obj.get("spec") or {}).get("suspend"):
            self.released.setdefault(obj["metadata"]["name"], at)

    def endpoint_slice(self, obj: JSON, at: float) -> None:
        for endpoint in obj.get("endpoints") or []:
            ref = endpoint.get("targetRef") or {}
            if ref.get("kind") == "Pod" and endpoint.get("hostname") and \
                    (endpoint.get("conditions") or {}).get("ready") is not False:
                self.published.setdefault(ref["name"], at)

    def mpijob(self, obj: JSON, at: float) -> None:
        self.mpijobs[obj["metadata"]["name"]] = obj

    def of(self, job: str, role: str) -> list[str]:
        return sorted(n for n, p in self.pods.items() if (p["metadata"].get("labels") or {}).get(JOB_NAME) == job
                      and p["metadata"]["labels"].get(JOB_ROLE) == role)

    def times(self, name: str, resumed: bool, start_seen: float) -> JobTimes:
        workers, launchers = self.of(name, "worker"), self.of(name, "launcher")
        first = min(launchers, key=lambda n: self.pod_first[n])
        job = self.mpijobs[name]
        suspended = next(c for c in job["status"]["conditions"] if c["type"] == "Suspended") if resumed else None
        outcome = "Succeeded" if is_true(job, "Succeeded") else "Failed" if is_true(job, "Failed") else "unfinished"
        return JobTimes(
            name=name, resumed=resumed, start_seen=start_seen, ready_seen=[self.ready[w][0] for w in workers],
            released_seen=self.released.get(f"{name}-launcher"), launcher_seen=self.pod_first[first],
            published_seen=max(self.published[w] for w in workers) if all(w in self.published for w in workers)
            else None,
            start_at=suspended["lastTransitionTime"] if suspended else job["metadata"]["creationTimestamp"],
            ready_at=[self.ready[w][1] for w in workers], launcher_at=self.pods[first]["metadata"]["creationTimestamp"],
            launcher_pods=len(launchers), restarts=sum(self.restarts[n] for n in launchers), outcome=outcome)


async def watch(load: ApiLoad, path: str, record: Any) -> None:
    """LIST then WATCH ``path`` for ever, calling ``record(object, arrival)`` for every object seen."""
    assert load.session is not None
    status, listing = await load.request("GET", path)
    if status != 200:
        raise RuntimeError(f"LIST {path}: {status} {listing}")
    for item in listing["items"]:
        record(item, time.time())
    version = listing["metadata"]["resourceVersion"]
    while True:
        url = f"{load.server}{path}?watch=1&allowWatchBookmarks=true&timeoutSeconds=120&resourceVersion={version}"
        async with load.session.get(url, timeout=WATCH_TIMEOUT) as response:
            if response.status != 200:
                raise RuntimeError(f"WATCH {path}: {response.status} {await response.text()}")
            async for line in response.content:
                arrival = time.time()
                event = orjson.loads(line)
                if event["type"] == "ERROR":
                    raise RuntimeError(f"WATCH {path}: {event['object']}")
                version = event["object"]["metadata"]["resourceVersion"]
                if event["type"] in ("ADDED", "MODIFIED"):
                    record(event["object"], arrival)


async def send(load: ApiLoad, method: str, path: str, body: JSON, content_type: str) -> float:
    """One write; returns the arrival time of its answer."""
    assert load.session is not None
    async with load.session.request(method, load.server + path, data=orjson.dumps(body),
                                    headers={"Content-Type": content_type}) as response:
        text = await response.text()
        arrived = time.time()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {text}")
    return arrived


async def until(what: str, check: Any, limit: float) -> None:
    """Poll ``check()`` (in-memory state the watches fill) every 50 ms until it holds, or raise after ``limit``."""
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {limit:.0f} s")
        await asyncio.sleep(0.05)


async def run_job(load: ApiLoad, seen: Seen, name: str, resumed: bool, limit: float) -> JobTimes:
    """Create one job (suspended and then resumed, or running), wait until it finishes, return what was seen."""
    mpijobs = f"/apis/kubeflow.org/v2beta1/namespaces/{NAMESPACE}/mpijobs"
    start = await send(load, "POST", mpijobs, gated_pi(name, resumed), "application/json")
    if resumed:
        await until(f"{name} Suspended", lambda: name in seen.mpijobs and is_true(seen.mpijobs[name], "Suspended"),
                    60)
        start = await send(load, "PATCH", f"{mpijobs}/{name}", {"spec": {"runPolicy": {"suspend": False}}},
                           "application/merge-patch+json")
    await until(f"{name} finished", lambda: name in seen.mpijobs and any(
        is_true(seen.mpijobs[name], kind) for kind in ("Succeeded", "Failed")), limit)
    return seen.times(name, resumed, start)


async def scrape(load: ApiLoad) -> dict[str, float]:
    """The reconciler's gated-seconds count and sum, through the API server's proxy to its pod's metrics port."""
    assert load.session is not None
    status, pods = await load.request("GET", f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/pods"
                                             f"?labelSelector=app.kubernetes.io/name={RECONCILER}")
    running = [p["metadata"]["name"] for p in pods["items"] if p["status"].get("phase") == "Running"]
    if status != 200 or len(running) != 1:
        raise RuntimeError(f"the reconciler's pod: {status} {running}")
    url = f"{load.server}/api/v1/namespaces/{OPERATOR_NAMESPACE}/pods/{running[0]}:9090/proxy/metrics"
    async with load.session.get(url) as response:
        return metric_values(await response.text())


async def measure(cluster: RealNodeCluster, args: argparse.Namespace) -> tuple[list[JobTimes], JSON]:
    seen = Seen()
    base = f"/namespaces/{NAMESPACE}"
    async with ApiLoad(cluster.server, cluster.ca_file, cluster.admin_cert, cluster.admin_key) as load:
        await load.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        watches = [asyncio.create_task(watch(load, path, record)) for path, record in (
            (f"/api/v1{base}/pods", seen.pod), (f"/apis/batch/v1{base}/jobs", seen.job),
            (f"/apis/kubeflow.org/v2beta1{base}/mpijobs", seen.mpijob),
            (f"/apis/discovery.k8s.io/v1{base}/endpointslices", seen.endpoint_slice))]
        try:
            for index in range(args.warmup):  # not counted: the node's first containers of the image
                say(f"warm-up {describe(await run_job(load, seen, f'warm{index}', index % 2 == 0, args.limit))}")
            before = await scrape(load)
            gate = asyncio.Semaphore(args.parallel)
            jobs: list[JobTimes] = []

            async def one(index: int) -> None:
                async with gate:
                    job = await run_job(load, seen, f"g{index:02d}", index % 2 == 0, args.limit)
                jobs.append(job)
                say(describe(job))

            await asyncio.gather(*(one(i) for i in range(args.jobs)))
            return sorted(jobs, key=lambda j: j.name), metric_delta(before, await scrape(load))
        finally:
            for task in watches:
                task.cancel()


# ---- reporting


def say(text: str) -> None:
    print(text, flush=True)


def describe(job: JobTimes) -> str:
    s = spans(job)
    release = "".join(f", {k} {s[k]:.3f} s" for k in ("published", "release") if k in s)
    return (f"{job.name} ({'resumed' if job.resumed else 'created running'}): {job.outcome}; gating added "
            f"{s['added']:.3f} s (API {s['added_api']:.0f} s){release}; to the launcher pod {s['to_launcher']:.3f} s "
            f"(API {s['to_launcher_api']:.0f} s); launcher pods {job.launcher_pods}, restarts {job.restarts}")


SPAN_LABELS = {"added": "gating added: last worker Ready to launcher pod created, watch events (s)",
               "added_api": "the same from the API's timestamps (1 s resolution) (s)",
               "release": "of which: last worker Ready to launcher Job released (or created running), watch events (s)",
               "published": "last worker Ready to every worker in the Service's EndpointSlices (its DNS name), watch "
                            "events (s)",
               "to_launcher": "MPIJob created (or resumed) to launcher pod created, watch events (s)",
               "to_launcher_api": "the same from the API's timestamps (1 s resolution) (s)"}


def report(results: JSON) -> list[str]:
    lines = []
    for group, label in (("all", "every job"), ("resumed", "created suspended, resumed"),
                         ("created", "created running")):
        for key, text in SPAN_LABELS.items():
            f = results["figures"][group].get(key)
            if f:
                lines.append(f"{label}: {text}: p50 {f['p50']:.3f} p99 {f['p99']:.3f} max {f['max']:.3f} "
                             f"min {f['min']:.3f} (n {f['n']})")
    fig, metric = results["figures"], results["metric"]
    mean = "-" if metric["mean"] is None else f"{metric['mean']:.2f} s"
    lines += [f"launcher restarts {fig['restarts']}, extra launcher pods {fig['extra_launcher_pods']}, outcomes "
              f"{fig['outcomes']}",
              f"{METRIC}: {metric['count']:.0f} waits, mean {mean} (whole wait, 1 s timestamps)"]
    return lines


KUEUE_ROW = "| Launcher gating (`make bench-gating`)"


def kueue_rows(results: JSON) -> list[str]:
    """docs/kueue.md's Figures rows of a gating run."""
    fig = results["figures"]["all"]
    added, api, to = fig["added"], fig["added_api"], fig["to_launcher"]
    where = (f"N = {results['jobs']} pi jobs, {results['figures_resumed']} of them created suspended and resumed, "
             f"{results['parallel']} at a time, on the real node; {results['machine']}; {results['date']}")
    return [
        f"{KUEUE_ROW}: time added per job, last worker Ready to launcher pod created ({where}) | p50 "
        f"{added['p50']:.2f} s, p99 {added['p99']:.2f} s, max {added['max']:.2f} s (watch events; from the API's "
        f"1 s timestamps p50 {api['p50']:.1f} s, p99 {api['p99']:.1f} s) |",
        f"{KUEUE_ROW}: MPIJob created or resumed to launcher pod created, launcher restarts (same run) | p50 "
        f"{to['p50']:.2f} s, p99 {to['p99']:.2f} s; {results['figures']['restarts']} restarts |"]


def rewrite_kueue(results: JSON, doc: Path = KUEUE_DOC) -> None:
    """Replace the gating rows of docs/kueue.md's Figures table (appended to it the first time)."""
    lines = [line for line in doc.read_text(encoding="utf-8").splitlines() if not line.startswith(KUEUE_ROW)]
    start = lines.index("## Figures")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("|") and not lines[i + 1].startswith("|"))
    lines[end + 1:end + 1] = kueue_rows(results)
    doc.write_text("\n".join(lines) + "\n", encoding="utf-8")


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=3, help="jobs in flight at once")
    parser.add_argument("--warmup", type=int, default=1, help="jobs run first and not counted")
    parser.add_argument("--limit", type=float, default=300.0, help="seconds a job may take to finish")
    parser.add_argument("--note", action="append", default=[], help="a note kept in the results file")
    parser.add_argument("--no-docs", action="store_true", help="print only; leave the results file and docs alone")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    reason = unavailable()
    if reason:
        sys.exit(f"bench-gating needs the real node: {reason}")
    load_before = os.getloadavg()
    images = image_archives(["pause", "openmpi"]) + operator_image_archives()
    cluster = RealNodeCluster(bin_dir=find_bin_dir(), node_bin_dir=node_bin_dir(), images=images)
    with tempfile.TemporaryDirectory(prefix="bench-gating-") as tmp, cluster:
        deploy(cluster, Path(tmp))
        began = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        jobs, metric = asyncio.run(measure(cluster, args))
    results: JSON = {
        "benchmark": "gating", "provenance": "measured", "date": began, "commit": benchdoc.current_commit(),
        "command": " ".join(["python -m hack.bench.gating", *sys.argv[1:]]), "rounds": 1, "jobs": args.jobs,
        "parallel": args.parallel, "warmup": args.warmup, "figures_resumed": sum(j.resumed for j in jobs),
        "machine": f"{os.cpu_count()} cores ({cpu_model()}), Python {platform.python_version()}, load average "
                   f"{load_before[0]:.1f} before and {os.getloadavg()[0]:.1f} after",
        "notes": args.note, "figures": figures(jobs), "metric": metric, "runs": [asdict(j) for j in jobs]}
    for line in report(results):
        say(line)
    if args.no_docs:
        return
    benchdoc.write_json(RESULTS, results, places=3)
    benchdoc.rewrite()
    rewrite_kueue(results)
    say(f"wrote {RESULTS.relative_to(REPO_ROOT)}, the summary of docs/benchmarks.md and docs/kueue.md's Figures rows")


if __name__ == "__main__":
    main()
