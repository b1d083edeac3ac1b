"""Scale side by side (issue 36): one job of W = 10,000 workers, and 1,000 jobs of 4 workers submitted at
once, each operator alone on one local control plane, in turn (the order alternates each round).

Every figure comes from something that cannot stop early: the API server's audit log (the MPIJob POSTs, the
operator's pod creates and their answers, every request it made by verb and resource, the ConfigMap bodies it
wrote) and counts checked by LIST once the pods are there, never a watch that the API server may end under load.
For each scenario and operator:
- time from the first MPIJob POST to the last worker created (audit timestamps of the POST and of the operator's
  last pod create answered 201), and to every pod of the namespace Running (a LIST of the pods not Running finds
  none, and every worker was created: polled each second, so to within a second);
- the operator's pod creates answered 201 and 409 (AlreadyExists), and every request it made by verb and resource;
- ConfigMap bytes written: the request bodies of its ConfigMap creates, updates and patches (the audit policy
  records the request body of ConfigMaps only, never of Secrets);
- CPU: utime + stime of ``/proc/<pid>/stat`` (the whole process, every thread) from just before the first POST
  until every pod is Running and the process is idle again (under 0.05 CPU-s in a second, at most 60 s), printed
  per 1,000 pods; peak and final RSS (VmHWM, VmRSS);
- the EndpointSlices of the namespace (count, endpoints).

Both operators run with raised client limits (``--kube-api-qps=1000 --kube-api-burst=1000``) and the control
plane's kube-scheduler and kube-controller-manager with theirs raised (200 QPS, 400 burst; their defaults are
50/100 and 20/30). kwok nodes of 1,000 pods each, enough for the largest scenario.
Usage: ``python -m hack.bench.scale [--operators go,ours] [--rounds 1] [--workers 10000] [--jobs 1000]``; it
writes hack/bench/results/scale.json (date, commit, command, every run) and the summary of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import math
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from hack.bench import doc as benchdoc
from hack.bench.apiload import ApiLoad
from hack.bench.peer.measure import create_namespace, log_size, warm_up
from hack.bench.peer.operators import RAISED_LIMITS, GoOperator, Operator, OurOperator
from hack.bench.procstat import ProcessSample
from hack.devcluster import LocalCluster, NodePool
from hack.devcluster.audit import audit_events, resource_of
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.operators import PEER_LOCK_NAMESPACE as LOCK_NAMESPACE
from hack.devcluster.operators import REPO_ROOT, build_peer

CRD = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
RESULTS = benchdoc.RESULTS / "scale.json"
HANG = {"test.mpijob/outcome": "hang"}  # kwok never completes such a launcher: the job stays live
MPIJOBS = "/apis/kubeflow.org/v2beta1/namespaces/{ns}/mpijobs"
WORKER = "training.kubeflow.org/job-role=worker"
PODS_PER_NODE = 1000
IDLE_CPU = 0.05  # CPU-seconds in one second under which the operator counts as idle
CPU_METHOD = ("utime+stime of /proc/<pid>/stat (every thread of the process) from the first MPIJob POST until "
              "every pod is Running and the operator idle again (under 0.05 CPU-s in 1 s)")
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  resources: [{group: "", resources: ["configmaps"]}]
- level: Metadata
"""


def audit_flags(directory: Path) -> tuple[list[str], Path]:
    """kube-apiserver flags for the audit log (batched, flushed within a second) and the log's path."""
    directory.mkdir(parents=True, exist_ok=True)
    policy = directory / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    log = directory / "audit.log"
    return [f"--audit-policy-file={policy}", f"--audit-log-path={log}", "--audit-log-format=json",
            "--audit-log-mode=batch", "--audit-log-batch-max-wait=1s", "--audit-log-maxsize=0"], log


def stamp(text: str) -> float:
    """An audit timestamp (RFC 3339, microseconds) as seconds since the epoch."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def from_audit(log: Path, offset: int, namespaces: set[str]) -> dict[str, Any]:
    """What the audit log shows of a scenario in ``namespaces``: the first MPIJob POST, the operator's pod
    creates (201 and 409, the last 201's time), its requests by verb and resource, its ConfigMap bytes."""
    first_post = math.inf
    last_create = 0.0
    creates: collections.Counter[int] = collections.Counter()
    requests: collections.Counter[str] = collections.Counter()
    config_bytes = config_writes = 0
    for event in audit_events(log, offset=offset):
        ref = event.get("objectRef") or {}
        if event.get("stage") != "ResponseComplete" or ref.get("namespace") not in namespaces:
            continue
        verb, resource = str(event.get("verb")), resource_of(event)
        code = int((event.get("responseStatus") or {}).get("code", 0))
        if verb == "create" and resource == "mpijobs" and code == 201:
            first_post = min(first_post, stamp(event["requestReceivedTimestamp"]))
        if not str(event.get("userAgent", "")).startswith("mpi-operator"):
            continue
        requests[f"{verb} {resource}"] += 1
        if verb == "create" and resource == "pods":
            creates[code] += 1
            if code == 201:
                last_create = max(last_create, stamp(event["stageTimestamp"]))
        if resource == "configmaps" and verb in ("create", "update", "patch") and code < 300:
            config_writes += 1
            config_bytes += len(orjson.dumps(event.get("requestObject")))
    return {"first_post": first_post, "last_create": last_create, "created": creates[201],
            "already_exists": creates[409], "create_codes": {str(k): v for k, v in sorted(creates.items())},
            "requests": dict(sorted(requests.items())), "configmap_writes": config_writes,
            "configmap_bytes": config_bytes}


async def not_running(load: ApiLoad, namespace: str) -> int:
    """Whether any pod of the namespace is not Running (0 or 1: one LIST of at most one pod)."""
    status, listing = await load.request("GET", f"/api/v1/namespaces/{namespace}/pods"
                                                "?fieldSelector=status.phase!%3DRunning&limit=1")
    if status != 200:
        raise RuntimeError(f"LIST pods of {namespace}: {status} {listing}")
    return len(listing["items"])


async def count_pods(load: ApiLoad, namespace: str, selector: str) -> int:
    """The pods of the namespace matching ``selector``, counted page by page (500 a page)."""
    count, token = 0, ""
    while True:
        path = f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}&limit=500"
        status, page = await load.request("GET", path + (f"&continue={token}" if token else ""))
        if status != 200:
            raise RuntimeError(f"LIST pods of {namespace}: {status} {page}")
        count += len(page["items"])
        token = page["metadata"].get("continue") or ""
        if not token:
            return count


async def endpoint_slices(load: ApiLoad, namespace: str) -> tuple[int, int]:
    _, listing = await load.request("GET", f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices")
    items = listing["items"]
    return len(items), sum(len(item.get("endpoints") or []) for item in items)


async def delete_namespace(load: ApiLoad, namespace: str, limit: float) -> None:
    """The namespace's MPIJobs and pods deleted (background propagation), then the namespace; waits until it is
    gone, polling with LISTs of one item (a 10,000-pod LIST every poll would load the API server). The collection
    deletes are sent again every 10 s while pods remain: one DELETE of 1,000 MPIJobs stopped after 903 of them
    (the API server's own request timeout) and left the rest, with their pods, in place."""
    background = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    deadline = time.monotonic() + limit
    resent = 0.0
    while True:
        if time.monotonic() - resent >= 10:
            await load.request("DELETE", MPIJOBS.format(ns=namespace), background)
            await load.request("DELETE", f"/api/v1/namespaces/{namespace}/pods", background)
            resent = time.monotonic()
        if not (await load.request("GET", f"/api/v1/namespaces/{namespace}/pods?limit=1"))[1]["items"]:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"pods of namespace {namespace} still exist after {limit} s")
        await asyncio.sleep(1)
    await load.request("DELETE", f"/api/v1/namespaces/{namespace}")
    while (await load.request("GET", f"/api/v1/namespaces/{namespace}"))[0] != 404:
        if time.monotonic() > deadline:
            raise TimeoutError(f"namespace {namespace} still exists after {limit} s")
        await asyncio.sleep(1)


async def scenario(load: ApiLoad, operator: Operator, audit_log: Path, namespace: str, jobs: int, workers: int,
                   limit: float) -> dict[str, Any]:
    """``jobs`` MPIJobs of ``workers`` workers POSTed at once (32 requests in flight) into ``namespace``, measured
    until every pod is Running and the operator idle; see the module docstring for what is measured."""
    await create_namespace(load, namespace)
    await asyncio.sleep(2)  # the audit batch of the namespace's creation is flushed before the offset is taken
    offset = log_size(audit_log)
    pid = operator.pid
    before = ProcessSample.of(pid)
    began = time.time()
    gate = asyncio.Semaphore(32)

    async def post(index: int) -> None:
        name = "bench" if jobs == 1 else f"j{index:04d}"
        async with gate:
            status, answer = await load.request("POST", MPIJOBS.format(ns=namespace),
                                                mpijob(name, workers, launcher_labels=HANG))
        if status != 201:
            raise RuntimeError(f"MPIJob POST: {status} {answer}")

    await asyncio.gather(*(post(index) for index in range(jobs)))
    expected = jobs * workers
    peak_rss = 0
    running_at = None
    deadline = time.monotonic() + limit
    while running_at is None:
        if not operator.alive():
            raise RuntimeError(f"the operator (pid {pid}) exited")
        if time.monotonic() > deadline:
            raise TimeoutError(f"not every pod of {namespace} Running {limit} s after the POST")
        peak_rss = max(peak_rss, ProcessSample.of(pid).rss_kb)
        polled = time.time()
        if from_audit(audit_log, offset, {namespace})["created"] >= expected and not await not_running(load,
                                                                                                      namespace):
            running_at = polled
            break
        await asyncio.sleep(1)
    idle_since = ProcessSample.of(pid).cpu_seconds
    for _ in range(60):  # until the operator is idle again: the status writes and settled ConfigMaps included
        await asyncio.sleep(1)
        now = ProcessSample.of(pid)
        peak_rss = max(peak_rss, now.rss_kb)
        if now.cpu_seconds - idle_since < IDLE_CPU:
            break
        idle_since = now.cpu_seconds
    after = ProcessSample.of(pid)
    await asyncio.sleep(2)  # the audit log's last batch
    audit = from_audit(audit_log, offset, {namespace})
    workers_found = await count_pods(load, namespace, WORKER)
    slices, endpoints = await endpoint_slices(load, namespace)
    cpu = after.cpu_seconds - before.cpu_seconds
    first = audit["first_post"] if audit["first_post"] != math.inf else began
    result = {
        "jobs": jobs, "workers": workers, "pods": expected, "workers_found": workers_found,
        "all_created": audit["last_create"] - first, "all_running": running_at - first,
        "created": audit["created"], "already_exists": audit["already_exists"], "create_codes": audit["create_codes"],
        "requests": audit["requests"], "configmap_writes": audit["configmap_writes"],
        "configmap_bytes": audit["configmap_bytes"], "cpu": cpu, "cpu_per_1000_pods": cpu * 1000 / expected,
        "peak_rss_kb": max(peak_rss, after.rss_kb), "rss_kb": after.rss_kb, "hwm_kb": after.peak_rss_kb,
        "endpoint_slices": slices, "endpoints": endpoints,
    }
    await delete_namespace(load, namespace, limit=1800)
    return result


def say(text: str) -> None:
    print(text, flush=True)


def describe(kind: str, name: str, run: dict[str, Any]) -> str:
    top = ", ".join(f"{k} {v}" for k, v in sorted(run["requests"].items(), key=lambda kv: -kv[1])[:6])
    return (f"{kind} {name}: {run['pods']} pods, created {run['created']} (409: {run['already_exists']}, found "
            f"{run['workers_found']}), all created {run['all_created']:.1f} s, all Running {run['all_running']:.1f} s, "
            f"CPU {run['cpu']:.1f} s ({run['cpu_per_1000_pods']:.2f} s per 1,000 pods), peak RSS "
            f"{run['peak_rss_kb'] / 1024:.1f} MiB, ConfigMap {run['configmap_writes']} writes "
            f"{run['configmap_bytes']:,} bytes, EndpointSlices {run['endpoint_slices']} ({run['endpoints']} "
            f"endpoints); requests: {top}")


def measure(args: argparse.Namespace, results: dict[str, Any]) -> None:
    kinds = [k for k in args.operators.split(",") if k]
    binary = build_peer(args.peer_version) if "go" in kinds else None
    scenarios = [("one", 1, args.workers), ("many", args.jobs, args.job_workers)]
    scenarios = [s for s in scenarios if s[0] in args.scenarios.split(",")]
    largest = max(jobs * (workers + 1) for _, jobs, workers in scenarios)
    nodes = math.ceil(largest / PODS_PER_NODE) + 1
    results["nodes"] = f"{nodes} kwok nodes of {PODS_PER_NODE} pods"
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp_name:
        tmp = Path(tmp_name)
        flags, audit_log = audit_flags(tmp / "audit")
        with LocalCluster(nodes=NodePool(count=nodes, pods=str(PODS_PER_NODE)), crds=[CRD], apiserver_flags=flags,
                          verbose=False) as cluster:
            def make(kind: str, tag: str) -> Operator:
                if kind == "go":
                    assert binary is not None
                    return GoOperator(binary, cluster, tmp, RAISED_LIMITS, tag)
                return OurOperator(cluster, tmp, RAISED_LIMITS, tag)

            async def everything() -> None:
                async with ApiLoad(cluster.server, cluster.ca_file, cluster.admin_cert, cluster.admin_key) as load:
                    await create_namespace(load, LOCK_NAMESPACE)
                    for round_ in range(args.rounds):
                        for kind in kinds if round_ % 2 == 0 else kinds[::-1]:
                            for name, jobs, workers in scenarios:
                                operator = make(kind, f"{name}-r{round_}")
                                operator.start()
                                try:
                                    await warm_up(load, f"warm-{kind}-{name}-r{round_}", operator.pid,
                                                  operator.alive, 120)
                                    run = await scenario(load, operator, audit_log, f"{name}-{kind}-r{round_}",
                                                         jobs, workers, args.limit)
                                finally:
                                    operator.stop()
                                run.update(operator=kind, scenario=name, round=round_)
                                results["runs"].append(run)
                                say(describe(kind, name, run))
                                if not args.no_docs:  # kept as it goes: a run cut short keeps what it measured
                                    benchdoc.write_json(RESULTS, results, places=3)

            asyncio.run(everything())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--operators", default="go,ours")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--scenarios", default="one,many", help="one (one job of --workers), many (--jobs jobs)")
    parser.add_argument("--workers", type=int, default=10000)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--job-workers", type=int, default=4)
    parser.add_argument("--limit", type=float, default=1800.0, help="seconds a scenario may take to be Running")
    parser.add_argument("--peer-version", default="v0.8.2")
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
        "control_plane": "kube-scheduler and kube-controller-manager with raised client limits (200 QPS, 400 burst)",
        "cpu_method": CPU_METHOD, "notes": args.note, "runs": []}
    measure(args, results)
    if args.no_docs:
        return
    benchdoc.write_json(RESULTS, results, places=3)
    benchdoc.rewrite()
    say(f"wrote {RESULTS.relative_to(REPO_ROOT)} and the summary of docs/benchmarks.md")


if __name__ == "__main__":
    main()
