"""B7 recovery: a W = 1,000 job whose reconciler is SIGKILLed half-way through creating its workers.

One local control plane (4 kwok nodes of 1,000 pods, audit log on); the reconciler runs as shipped
(``deploy/reconciler``'s args: leader election on, no client-side limit) with admin credentials. Each
round runs the same job twice, in alternating order: once undisturbed, once with the reconciler killed
(SIGKILL, as a crash or an OOM kill would) when a watch has seen W/2 workers, and a new process started at
once (it waits out the dead leader's Lease, as a restarted Deployment pod would). Both runs end when every
worker exists, the launcher Job exists, the MPIJob says Running with W active workers, and the
reconciler's writes have stopped. Reported per run, from the audit log: the reconciler's writes by verb
and resource, worker creates by answer (201; 409, a create repeated for a pod that exists; 504, a create
the killed process had in flight, which the API server may still have carried out), the worker pods at
the end, pods deleted; and the time from the kill to the successor leading, to all workers created, to Running.
Extra writes = interrupted - undisturbed, of the same round. Usage:
``python -m hack.bench.recovery [--workers 1000] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import inspect
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from hack.bench.apiload import ApiLoad
from hack.bench.reconciler import CRD, HANG, delete_namespace
from hack.devcluster import LocalCluster, NodePool
from hack.devcluster.audit import WRITE_VERBS, audit_events, audit_flags, resource_of
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.supervisor import SupervisedReconciler

LOCK_NAMESPACE = "mpi-operator"
QUIET_SECONDS = 3.0  # the reconciler's writes are over when none came for this long


@dataclass
class Run:
    interrupted: bool
    writes: collections.Counter[str] = field(default_factory=collections.Counter)
    creates: collections.Counter[int] = field(default_factory=collections.Counter)  # worker creates by code
    workers_at_end: int = 0  # worker pods listed once the run is over
    deleted_pods: int = 0
    to_leader: float = 0.0  # from the kill, the successor leading
    to_all_created: float = 0.0  # from the POST (undisturbed) or the kill (interrupted)
    to_running: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.writes.values())


async def leading(reconciler: SupervisedReconciler, limit: float = 60) -> float:
    """Seconds until the current reconciler process leads (its log says so)."""
    def leads() -> bool:
        reconciler.check_no_unexpected_exit()
        return "became leader" in reconciler.log_text()

    return await _until(leads, limit, f"reconciler run {len(reconciler.runs)} leading")


def _worker_added(event: dict[str, Any]) -> str | None:
    pod = event["object"]
    labels = pod["metadata"].get("labels") or {}
    return pod["metadata"]["name"] if event["type"] == "ADDED" and labels.get(
        "training.kubeflow.org/job-role") == "worker" else None


async def _watch_workers(load: ApiLoad, namespace: str, seen: set[str], opened: asyncio.Event) -> None:
    """Adds the names of the namespace's worker pods to ``seen``: a list, then watches from its resourceVersion,
    opened again whenever the API server ends one. ``opened`` is set once the first watch answered."""
    assert load.session is not None
    path = f"/api/v1/namespaces/{namespace}/pods"
    while True:
        _, listed = await load.request("GET", path)
        seen.update(p["metadata"]["name"] for p in listed["items"] if _worker_added({"type": "ADDED", "object": p}))
        params = {"watch": "1", "resourceVersion": listed["metadata"]["resourceVersion"]}
        async with load.session.get(load.server + path, params=params,
                                    timeout=aiohttp.ClientTimeout(total=None)) as response:
            opened.set()
            async for line in response.content:
                name = _worker_added(orjson.loads(line))
                if name:
                    seen.add(name)


async def _until(predicate: Callable[[], bool | Awaitable[bool]], limit: float, what: str,
                 interval: float = 0.05) -> float:
    """Seconds until ``predicate`` (plain or async) holds, polled every ``interval``; TimeoutError after ``limit``."""
    begin = time.monotonic()
    while True:
        held = predicate()
        if inspect.isawaitable(held):
            held = await held
        if held:
            return time.monotonic() - begin
        if time.monotonic() - begin > limit:
            raise TimeoutError(f"{what}: not within {limit} s")
        await asyncio.sleep(interval)


def _audit(log: Path, namespace: str, offset: int, run: Run) -> int:
    """Fills ``run`` with the reconciler's writes in ``namespace``; returns the number of its events."""
    run.writes.clear()
    run.creates.clear()
    run.deleted_pods = 0
    for event in audit_events(log, offset=offset):
        ref = event.get("objectRef") or {}
        if not (event.get("userAgent", "").startswith("mpi-operator/") and ref.get("namespace") == namespace
                and event.get("verb") in WRITE_VERBS and event.get("stage") == "ResponseComplete"):
            continue
        resource = resource_of(event)
        code = int((event.get("responseStatus") or {}).get("code", 0))
        run.writes[f"{event['verb']} {resource}"] += 1
        if resource == "pods" and event["verb"] == "create":
            run.creates[code] += 1
        if resource == "pods" and event["verb"] == "delete":
            run.deleted_pods += 1
    return run.total


async def one_run(load: ApiLoad, reconciler: SupervisedReconciler, audit_log: Path, namespace: str, workers: int,
                  interrupted: bool) -> Run:
    run = Run(interrupted)
    await load.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    offset = _size(audit_log)
    seen: set[str] = set()
    opened = asyncio.Event()
    watcher = asyncio.create_task(_watch_workers(load, namespace, seen, opened))
    await _until(lambda: opened.is_set() or watcher.done(), 30, "the worker watch open")  # before the clock starts
    if watcher.done():
        watcher.result()  # raises the watch's error
    base = f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs"
    started = time.monotonic()
    status, _ = await load.request("POST", base, mpijob("b7", workers, launcher_labels=HANG))
    assert status == 201, status
    if interrupted:
        await _until(lambda: len(seen) >= workers // 2, 300, "half the workers")
        reconciler.kill()
        started = time.monotonic()
        print(f"  killed at {len(seen)} workers seen", flush=True)
        run.to_leader = await leading(reconciler)

    async def job_running() -> bool:
        code, job = await load.request("GET", f"{base}/b7")
        status = (job.get("status") or {}) if code == 200 else {}
        running = any(c["type"] == "Running" and c["status"] == "True" for c in status.get("conditions") or [])
        return running and (status.get("replicaStatuses") or {}).get("Worker", {}).get("active") == workers

    try:
        await _until(lambda: len(seen) >= workers or watcher.done(), 600, "all workers created")
    finally:
        print(f"  {len(seen)} workers seen after {time.monotonic() - started:.1f} s", flush=True)
    if watcher.done():
        watcher.result()  # raises the watch's error
    run.to_all_created = time.monotonic() - started
    await _until(job_running, 600, "the job Running with every worker active", interval=0.2)
    run.to_running = time.monotonic() - started
    watcher.cancel()
    last, quiet_since = -1, time.monotonic()
    while time.monotonic() - quiet_since < QUIET_SECONDS:  # polls the audit log until the writes stop
        count = _audit(audit_log, namespace, offset, run)
        if count != last:
            last, quiet_since = count, time.monotonic()
        await asyncio.sleep(0.5)
    _, pods = await load.request("GET", f"/api/v1/namespaces/{namespace}/pods"
                                        "?labelSelector=training.kubeflow.org%2Fjob-role%3Dworker")
    run.workers_at_end = len(pods["items"])
    await delete_namespace(load, namespace)
    return run


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _report(pairs: list[tuple[Run, Run]], workers: int) -> None:
    print(f"\n# B7 recovery, W = {workers}, {len(pairs)} round(s); reconciler as shipped (leader election on)")
    print("| round | undisturbed writes | interrupted writes | extra | extra % | worker creates 201/409/other "
          "(interrupted) | workers at the end | pods deleted | kill to leading (s) | kill to all created (s) "
          "| kill to Running (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    extras = []
    for index, (clean, hit) in enumerate(pairs):
        extra = hit.total - clean.total
        extras.append(100 * extra / clean.total)
        print(f"| {index} | {clean.total} | {hit.total} | {extra} | {extras[-1]:.2f} | {hit.creates[201]}/"
              f"{hit.creates[409]}/{sum(hit.creates.values()) - hit.creates[201] - hit.creates[409]} | "
              f"{hit.workers_at_end} | {hit.deleted_pods} | {hit.to_leader:.1f} | "
              f"{hit.to_all_created:.1f} | {hit.to_running:.1f} |")
    for index, (clean, hit) in enumerate(pairs):
        print(f"round {index}: worker create answers by code: undisturbed {dict(clean.creates)}, "
              f"interrupted {dict(hit.creates)}")
    print(f"\nextra writes: median {statistics.median(extras):.2f} % (min {min(extras):.2f}, max {max(extras):.2f})")
    clean, hit = pairs[-1]
    for key in sorted(set(clean.writes) | set(hit.writes)):
        print(f"- {key}: undisturbed {clean.writes[key]}, interrupted {hit.writes[key]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as tmp_name:
        tmp = Path(tmp_name)
        flags, audit_log = audit_flags(tmp / "audit")
        with LocalCluster(nodes=NodePool(count=4, pods="1000"), crds=[CRD], apiserver_flags=flags,
                          verbose=False) as cluster:
            cluster.kubectl("create", "namespace", LOCK_NAMESPACE, check=True)
            reconciler = SupervisedReconciler(cluster, tmp / "reconciler", as_shipped=True).start()

            async def everything() -> list[tuple[Run, Run]]:
                pairs = []
                async with ApiLoad(cluster.server, cluster.ca_file, cluster.admin_cert, cluster.admin_key) as load:
                    await leading(reconciler)
                    for round_ in range(args.rounds):
                        runs: dict[bool, Run] = {}
                        for interrupted in ((False, True) if round_ % 2 == 0 else (True, False)):
                            kind = "interrupted" if interrupted else "undisturbed"
                            print(f"round {round_}: {kind}", flush=True)
                            runs[interrupted] = await one_run(load, reconciler, audit_log, f"b7-r{round_}-{kind}",
                                                              args.workers, interrupted)
                        pairs.append((runs[False], runs[True]))
                return pairs

            try:
                _report(asyncio.run(everything()), args.workers)
            finally:
                reconciler.stop()


if __name__ == "__main__":
    main()
