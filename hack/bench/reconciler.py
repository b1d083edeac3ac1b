"""B0 + B3 + B5: how fast our reconciler creates a job's pods, against the API server's own ceiling,
and how many API writes a job costs.

One run on a local control plane (4 kwok nodes of 1000 pods each; audit log on):
- B0: 2,000 worker-shaped Pods created by a raw client, 32 in flight: scheduling-gated, so the scheduler
  and kwok stay out of it (the API server's pod-create ceiling C_max), and again as the exact template our
  reconciler emits, bound by the scheduler and started by kwok while the creates go on, as a job's workers
  are (C_sched: the fastest any client gets those pods created on this control plane).
- B3: for W in 1, 64, 512 workers, the time from the MPIJob POST until a watch sees the W-th worker
  Pod, and until the launcher Job exists; efficiency E = W / (TTAC x C_max).
- B5: one W=64 MPIJob from creation through Succeeded and worker cleanup; the API writes made by the
  reconciler (user agent ``mpi-operator``) counted from the audit log, against the target W + 12 (W + 11 is
  the creates, upstream's 3 events, 3 status writes and one ``discover_hosts.sh`` patch; a job whose launcher
  ends before its Running workers settle gets no patch at all).
The reconciler runs with ``--kube-api-qps=1000 --kube-api-burst=1000`` (raised limits, stated in the
report). Usage: ``python -m hack.bench.reconciler [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from hack.bench.apiload import ApiLoad
from hack.bench.peer.report import spread
from hack.bench.procstat import ProcessSample
from hack.devcluster import LocalCluster, NodePool
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.operators import REPO_ROOT, OperatorReconciler
from hack.devcluster.wait import wait_for
from reconciler.mpijob.builders import build_worker
from shared.api import MPIJob, defaulted_dict

CRD = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
"""
RECONCILER_FLAGS = ("--kube-api-qps=1000", "--kube-api-burst=1000", "--max-concurrent-writes=64")
HANG = {"test.mpijob/outcome": "hang"}


async def pod_ceiling(load: ApiLoad, count: int = 2000, *, scheduled: bool = False) -> float:
    """Pod creates/s of a raw client, 32 in flight: scheduling-gated pods, or (``scheduled``) the worker
    template as our reconciler emits it, which the scheduler binds and kwok starts meanwhile."""
    namespace = "b0-scheduled" if scheduled else "b0"
    await load.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    job = MPIJob.model_validate(defaulted_dict({**mpijob("b0", 1), "metadata": {"name": "b0", "namespace": namespace,
                                                                                  "uid": "b0"}}))
    template = build_worker(job, 0)
    if not scheduled:
        template["spec"]["schedulingGates"] = [{"name": "bench.mpijob/hold"}]

    def pod(index: int) -> dict[str, Any]:
        return {**template, "metadata": {**template["metadata"], "name": f"b0-worker-{index}",
                                         "ownerReferences": []}}

    path = f"/api/v1/namespaces/{namespace}/pods"
    await load.closed_loop(path, pod, 100, 32)  # warm-up
    result = await load.closed_loop(path, lambda i: pod(i + 100), count, 32)
    await delete_namespace(load, namespace)
    print(f"B0 pod creates ({'scheduled and started' if scheduled else 'scheduling-gated'}): {result.summary()}")
    return result.rate


async def time_to_all_created(load: ApiLoad, namespace: str, workers: int,
                              while_live: Callable[[], None] | None = None) -> tuple[float, float]:
    """(seconds to the W-th worker Pod, seconds to the launcher Job), from the MPIJob POST. ``while_live`` is
    called once both exist, before the job is deleted (to sample the reconciler with the job live)."""
    await load.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    seen: set[str] = set()
    launcher_at = 0.0
    session = load.session
    assert session is not None
    started = 0.0

    async def consume(response: aiohttp.ClientResponse, on_add: Callable[[dict[str, Any]], bool]) -> None:
        """Until ``on_add`` is satisfied; a watch the API server ends first is an error, never a figure (under
        load it closed one after part of 10,000 pods, and the time to that point was reported as the time to
        all of them: issue 36)."""
        async with response:
            async for line in response.content:
                event = orjson.loads(line)
                if event["type"] == "ADDED" and on_add(event["object"]):
                    return
        raise RuntimeError(f"the watch {response.url.path} ended early ({len(seen)} of {workers} workers seen); "
                           "use python -m hack.bench.scale, which times from the audit log, at this size")

    def worker_added(pod: dict[str, Any]) -> bool:
        if pod["metadata"].get("labels", {}).get("training.kubeflow.org/job-role") == "worker":
            seen.add(pod["metadata"]["name"])
        return len(seen) >= workers

    def launcher_added(_: dict[str, Any]) -> bool:
        nonlocal launcher_at
        launcher_at = time.perf_counter() - started
        return True

    # The API server answers a watch's headers once the watch is registered: the clock starts after both.
    pod_watch = await session.get(load.server + f"/api/v1/namespaces/{namespace}/pods", params={"watch": "1"})
    job_watch = await session.get(load.server + f"/apis/batch/v1/namespaces/{namespace}/jobs", params={"watch": "1"})
    pods = asyncio.create_task(consume(pod_watch, worker_added))
    jobs = asyncio.create_task(consume(job_watch, launcher_added))
    started = time.perf_counter()
    status, _ = await load.request("POST", f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs",
                                   mpijob("bench", workers, launcher_labels=HANG))
    assert status == 201, status
    await asyncio.wait_for(pods, timeout=300)
    all_created = time.perf_counter() - started
    await asyncio.wait_for(jobs, timeout=60)
    if while_live is not None:
        while_live()
    await delete_namespace(load, namespace)
    return all_created, launcher_at


async def delete_namespace(load: ApiLoad, namespace: str, limit: float = 180) -> None:
    """Delete a namespace and wait until it is gone, so that one run's cleanup never overlaps the next.

    Its MPIJobs are deleted first with background propagation, as a user would: a namespace deletion
    removes Jobs with the orphan policy, and a launcher pod created in that same second can keep its
    Job-tracking finalizer for minutes (seen with the v1.36.3 Job controller).
    """
    background = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    await load.request("DELETE", f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs", background)
    await load.request("DELETE", f"/api/v1/namespaces/{namespace}/pods", background)
    deadline = time.monotonic() + limit
    while (await load.request("GET", f"/api/v1/namespaces/{namespace}/pods"))[1]["items"]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"pods of namespace {namespace} still exist after {limit} s")
        await asyncio.sleep(0.2)
    await load.request("DELETE", f"/api/v1/namespaces/{namespace}")
    while (await load.request("GET", f"/api/v1/namespaces/{namespace}"))[0] != 404:
        if time.monotonic() > deadline:
            raise TimeoutError(f"namespace {namespace} still exists after {limit} s")
        await asyncio.sleep(0.2)


def audit_writes(audit_log: Path, namespace: str) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for line in audit_log.read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        if (event.get("userAgent", "").startswith("mpi-operator") and ref.get("namespace") == namespace
                and event["verb"] in ("create", "update", "patch", "delete")):
            resource = ref.get("resource", "") + ("/" + ref["subresource"] if ref.get("subresource") else "")
            counts[f"{event['verb']} {resource}"] += 1
    return counts


def api_writes_per_job(cluster: LocalCluster, audit_log: Path, workers: int = 64) -> collections.Counter[str]:
    namespace = "b5"
    cluster.kubectl("create", "namespace", namespace, check=True)
    job = mpijob("b5", workers, runPolicy={"cleanPodPolicy": "Running"})
    cluster.rest.create(f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs", job)

    def finished_and_cleaned() -> bool:
        status = cluster.rest.get(f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs/b5").get("status", {})
        done = any(c["type"] == "Succeeded" and c["status"] == "True" for c in status.get("conditions", []))
        pods = cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector="
                                "training.kubeflow.org/job-role=worker")["items"]
        return done and not pods

    wait_for(finished_and_cleaned, timeout=180, interval=0.5, what="the W=64 job to succeed and be cleaned up")
    wait_for(lambda: audit_writes(audit_log, namespace)["update mpijobs/status"] >= 1, timeout=10)
    return audit_writes(audit_log, namespace)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default="1,64,512,1000")
    parser.add_argument("--reconciler-flag", action="append", default=[], help="extra reconciler flag (repeatable)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=FLAGS",
                        help="compare flag sets instead (repeatable): every repeat runs each variant's own "
                             "reconciler in turn, the order reversed every other repeat; B3 and RSS only")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    variants = [parse_variant(text) for text in args.variant]
    with tempfile.TemporaryDirectory(prefix="bench-reconciler-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "audit-policy.yaml").write_text(AUDIT_POLICY)
        audit_log = tmp / "audit.log"
        flags = [f"--audit-policy-file={tmp / 'audit-policy.yaml'}", f"--audit-log-path={audit_log}",
                 "--audit-log-format=json", "--audit-log-mode=batch"]
        with LocalCluster(nodes=NodePool(count=4, pods="1000"), crds=[CRD], apiserver_flags=flags,
                          verbose=False) as cluster:
            if variants:
                run_variants(cluster, tmp, sizes, args.repeats, variants, args.reconciler_flag)
                return
            reconciler = OperatorReconciler(cluster, tmp, *RECONCILER_FLAGS, *args.reconciler_flag)
            reconciler.start()
            try:
                reconciler.wait_ready()
                run(cluster, audit_log, sizes, args.repeats, [*RECONCILER_FLAGS, *args.reconciler_flag])
                assert reconciler.process is not None
                sample = ProcessSample.of(reconciler.process.pid)
                print(f"\nreconciler RSS at the end: {sample.rss_kb / 1024:.1f} MiB "
                      f"(peak {sample.peak_rss_kb / 1024:.1f} MiB), CPU {sample.cpu_seconds:.1f} s for the whole run")
            finally:
                reconciler.stop()


def parse_variant(text: str) -> tuple[str, list[str]]:
    name, sep, flags = text.partition("=")
    if not sep or not name:
        raise SystemExit(f"--variant wants NAME=FLAGS, got {text!r}")
    return name, flags.split()


def run_variants(cluster: LocalCluster, tmp: Path, sizes: list[int], repeats: int,
                 variants: list[tuple[str, list[str]]], common: list[str]) -> None:
    """B3 for each variant's reconciler in turn, with its RSS while each job is live and its peak RSS."""
    rows: dict[tuple[str, int], list[tuple[float, float, int]]] = {}
    peaks: dict[str, list[int]] = {}
    ceilings = []
    for repeat in range(repeats):
        for name, flags in variants if repeat % 2 == 0 else variants[::-1]:
            reconciler = OperatorReconciler(cluster, tmp, *RECONCILER_FLAGS, *common, *flags,
                                            name=f"reconciler-{name}-r{repeat}")
            reconciler.start()
            try:
                reconciler.wait_ready()
                process = reconciler.process
                assert process is not None

                async def measure(repeat: int = repeat, name: str = name, pid: int = process.pid) -> None:
                    async with ApiLoad(cluster.server, cluster.ca_file, cluster.admin_cert,
                                       cluster.admin_key) as load:
                        if repeat == 0 and name == variants[0][0]:
                            ceilings.append(await pod_ceiling(load))
                        for workers in sizes:
                            live: list[int] = []
                            ttac, launcher = await time_to_all_created(
                                load, f"b3-{name}-w{workers}-r{repeat}", workers,
                                functools.partial(sample_rss, pid, live))
                            rows.setdefault((name, workers), []).append((ttac, launcher, live[0]))
                            print(f"B3 {name} W={workers} run {repeat}: all workers {ttac:.3f} s, launcher "
                                  f"{launcher:.3f} s, RSS with the job live {live[0] / 1024:.1f} MiB", flush=True)
                    peaks.setdefault(name, []).append(ProcessSample.of(pid).peak_rss_kb)

                asyncio.run(measure())
            finally:
                reconciler.stop()
    print(f"\n# B3 by variant, {repeats} repeats, kube-apiserver v1.36.3, common flags "
          f"{' '.join([*RECONCILER_FLAGS, *common])}; C_max {ceilings[0]:.0f} pod creates/s")
    for name, flags in variants:
        print(f"- {name}: {' '.join(flags) or '(none)'}; peak RSS {spread([p / 1024 for p in peaks[name]], 1)} MiB")
    print("| variant | W | all workers created, s | launcher Job, s | RSS with the job live, MiB |")
    print("|---|---|---|---|---|")
    for workers in sizes:
        for name, _ in variants:
            got = rows[name, workers]
            print(f"| {name} | {workers} | {spread([r[0] for r in got], 3)} | {spread([r[1] for r in got], 3)} | "
                  f"{spread([r[2] / 1024 for r in got], 1)} |")


def sample_rss(pid: int, into: list[int]) -> None:
    into.append(ProcessSample.of(pid).rss_kb)


def run(cluster: LocalCluster, audit_log: Path, sizes: list[int], repeats: int, flags: list[str]) -> None:
    async def measure() -> tuple[float, float, dict[int, list[tuple[float, float]]]]:
        async with ApiLoad(cluster.server, cluster.ca_file, cluster.admin_cert, cluster.admin_key) as load:
            ceiling = await pod_ceiling(load)
            scheduled = await pod_ceiling(load, scheduled=True)
            timings: dict[int, list[tuple[float, float]]] = {}
            for repeat in range(repeats):
                for workers in sizes:
                    timing = await time_to_all_created(load, f"b3-w{workers}-r{repeat}", workers)
                    timings.setdefault(workers, []).append(timing)
                    print(f"B3 W={workers} run {repeat}: all workers {timing[0]:.3f} s, launcher {timing[1]:.3f} s")
            return ceiling, scheduled, timings

    ceiling, scheduled, timings = asyncio.run(measure())
    writes = api_writes_per_job(cluster, audit_log)
    print(f"\n# B0/B3 on {platform.node()} (2 cores), kube-apiserver v1.36.3, reconciler {' '.join(flags)}")
    print(f"C_max (pod creates/s, raw client, 32 in flight, scheduling-gated): {ceiling:.0f}; "
          f"C_sched (the same, scheduled and started): {scheduled:.0f}")
    print("| W | time to all workers created (median s) | to launcher Job (median s) | E = W/(TTAC*C_max) | "
          "TTAC / (W/C_sched) |")
    print("|---|---|---|---|---|")
    for workers, runs in timings.items():
        ttac = statistics.median(r[0] for r in runs)
        launcher = statistics.median(r[1] for r in runs)
        print(f"| {workers} | {ttac:.3f} | {launcher:.3f} | {workers / (ttac * ceiling):.2f} | "
              f"{ttac * scheduled / workers:.2f} |")
    total = sum(writes.values())
    print(f"\n# B5 API writes by the reconciler for one W=64 job, creation to Succeeded to cleanup: {total} "
          f"(target W + 12 = 76 without the deletes)")
    for key, count in sorted(writes.items()):
        print(f"- {key}: {count}")


if __name__ == "__main__":
    main()
