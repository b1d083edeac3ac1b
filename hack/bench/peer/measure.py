"""The measurements of one operator run: B3 (one job of W workers), B4 (many small jobs, open loop),
B5 (API writes of one job from the audit log) and the process samples of B6."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from hack.bench.apiload import ApiLoad
from hack.bench.procstat import ProcessSample, cpu_by_process, cpu_used
from hack.bench.reconciler import delete_namespace
from hack.devcluster.audit import WRITE_VERBS, audit_events, resource_of
from hack.devcluster.mpijobs import mpijob

HANG = {"test.mpijob/outcome": "hang"}  # kwok never completes such a launcher: the job stays live
MPIJOBS = "/apis/kubeflow.org/v2beta1/namespaces/{ns}/mpijobs"
WORKER_ROLE = "training.kubeflow.org/job-role"


class Watch:
    """A watch on one collection from the moment it is opened, calling ``on_event(type, object, seconds)``
    (``seconds``: perf_counter time of arrival) until it returns True. A stream the API server ends early
    (e.g. a watcher too slow for a burst of 1,000 pods) is reopened from the last resourceVersion seen; if
    that is too old (410), a LIST delivers the current objects as ADDED."""

    def __init__(self, load: ApiLoad, path: str, on_event: Callable[[str, dict[str, Any], float], bool]) -> None:
        self.load, self.path, self.on_event = load, path, on_event
        self.opened = asyncio.Event()
        self.reopened = 0
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        assert self.load.session is not None
        version = ""
        while True:
            params = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "3600"}
            if version:
                params["resourceVersion"] = version
            async with self.load.session.get(self.load.server + self.path, params=params) as response:
                response.raise_for_status()
                self.opened.set()
                async for line in response.content:
                    now = time.perf_counter()
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        version = await self._relist()
                        if version == "done":
                            return
                        break
                    version = obj.get("metadata", {}).get("resourceVersion", version)
                    if event["type"] != "BOOKMARK" and self.on_event(event["type"], obj, now):
                        return
            self.reopened += 1

    async def _relist(self) -> str:
        status, listing = await self.load.request("GET", self.path)
        if status != 200:
            raise RuntimeError(f"LIST {self.path}: {status} {listing}")
        now = time.perf_counter()
        for item in listing["items"]:
            if self.on_event("ADDED", item, now):
                return "done"
        return str(listing["metadata"]["resourceVersion"])

    async def ready(self) -> None:
        done, _ = await asyncio.wait([self.task, asyncio.create_task(self.opened.wait())], timeout=30,
                                     return_when=asyncio.FIRST_COMPLETED)
        if self.task in done:
            self.task.result()  # raises what failed
        await asyncio.sleep(0.1)  # the API server has registered the watcher once it has answered headers

    async def done(self, limit: float) -> None:
        await asyncio.wait_for(self.task, limit)

    def cancel(self) -> None:
        self.task.cancel()

async def create_namespace(load: ApiLoad, name: str) -> None:
    status, answer = await load.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    if status not in (201, 409):
        raise RuntimeError(f"namespace {name}: {status} {answer}")


async def one_job(load: ApiLoad, namespace: str, workers: int, pid: int, limit: float,
                  keep: bool = False) -> dict[str, Any]:
    """B3: POST one MPIJob of ``workers`` workers (launcher never finishing); seconds from the POST to the
    W-th worker Pod seen by a watch and to the launcher Job seen, the operator's CPU-seconds over that
    span, every process's CPU over it in percent of one core (who is busy while the pods are created), and
    the operator's RSS once everything exists. The namespace is deleted afterwards unless ``keep``."""
    await create_namespace(load, namespace)
    seen: set[str] = set()
    times: dict[str, float] = {}

    def pod_event(kind: str, pod: dict[str, Any], now: float) -> bool:
        if kind == "ADDED" and pod["metadata"].get("labels", {}).get(WORKER_ROLE) == "worker":
            seen.add(pod["metadata"]["name"])
            if len(seen) >= workers:
                times["workers"] = now
                return True
        return False

    def job_event(kind: str, _: dict[str, Any], now: float) -> bool:
        if kind == "ADDED":
            times["launcher"] = now
            return True
        return False

    pods = Watch(load, f"/api/v1/namespaces/{namespace}/pods", pod_event)
    jobs = Watch(load, f"/apis/batch/v1/namespaces/{namespace}/jobs", job_event)
    try:
        await pods.ready()
        await jobs.ready()
        before = ProcessSample.of(pid)
        machine_before = cpu_by_process()
        started = time.perf_counter()
        status, answer = await load.request("POST", MPIJOBS.format(ns=namespace),
                                            mpijob("bench", workers, launcher_labels=HANG))
        if status != 201:
            raise RuntimeError(f"MPIJob POST: {status} {answer}")
        await pods.done(limit)
        await jobs.done(limit)
        after = ProcessSample.of(pid)
        used = cpu_used(machine_before, cpu_by_process(), {pid: "operator", os.getpid(): "benchmark client"})
        wall = max(times["workers"], times["launcher"]) - started
    finally:
        pods.cancel()
        jobs.cancel()
    result = {"workers": workers, "ttac": times["workers"] - started, "launcher": times["launcher"] - started,
              "cpu": after.cpu_seconds - before.cpu_seconds, "rss_kb": after.rss_kb,
              "watch_reopened": pods.reopened + jobs.reopened,
              "cpu_percent": {name: round(100 * seconds / wall, 1) for name, seconds in used.items() if seconds > 0}}
    if not keep:
        await delete_namespace(load, namespace, limit=600)
    return result


async def many_jobs(load: ApiLoad, namespace: str, count: int, workers: int, rate: float,
                    limit: float) -> dict[str, Any]:
    """B4: ``count`` MPIJobs of ``workers`` workers POSTed open loop at ``rate`` per second; for each, the
    seconds from its POST to its launcher Job seen by a watch. Launchers not seen ``limit`` seconds after the
    last POST are not waited for: their latency is censored (at least the time waited, in ``censored``)."""
    await create_namespace(load, namespace)
    posted: dict[str, float] = {}
    created: dict[str, float] = {}
    errors = 0

    def job_event(kind: str, job: dict[str, Any], now: float) -> bool:
        if kind == "ADDED":
            owners = job["metadata"].get("ownerReferences") or [{}]
            created.setdefault(str(owners[0].get("name", job["metadata"]["name"])), now)
        return len(created) >= count

    jobs = Watch(load, f"/apis/batch/v1/namespaces/{namespace}/jobs", job_event)
    try:
        await jobs.ready()

        async def submit(index: int) -> None:
            nonlocal errors
            name = f"j{index:04d}"
            posted[name] = time.perf_counter()
            status, _ = await load.request("POST", MPIJOBS.format(ns=namespace),
                                           mpijob(name, workers, launcher_labels=HANG))
            if status != 201:
                errors += 1

        began = time.perf_counter()
        tasks = []
        for index in range(count):
            delay = began + index / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(submit(index)))
        await asyncio.gather(*tasks)
        with contextlib.suppress(TimeoutError):  # the missing launchers are reported as such
            await jobs.done(limit)
        gave_up = time.perf_counter()
    finally:
        jobs.cancel()
    latencies = sorted(created[name] - posted[name] for name in posted if name in created)
    censored = sorted(gave_up - posted[name] for name in posted if name not in created)
    last = max(created.values()) if created else began
    await delete_namespace(load, namespace, limit=600)
    return {"rate": rate, "count": count, "workers": workers, "latencies": latencies, "censored": censored,
            "errors": errors, "missing": count - len(latencies), "span": last - began}


async def writes_of_one_job(load: ApiLoad, namespace: str, workers: int, audit_log: Path,
                            limit: float) -> dict[str, Any]:
    """B5: one MPIJob of ``workers`` workers (``cleanPodPolicy: Running``; its launcher succeeds), from the
    POST until it is Succeeded and its workers are gone; the API writes made in its namespace by user agents
    starting ``mpi-operator``, counted from the audit log, by verb and resource."""
    await create_namespace(load, namespace)
    offset = log_size(audit_log)
    status, answer = await load.request("POST", MPIJOBS.format(ns=namespace), mpijob("b5", workers))
    if status != 201:
        raise RuntimeError(f"MPIJob POST: {status} {answer}")
    deadline = time.monotonic() + limit
    selector = f"?labelSelector={WORKER_ROLE}%3Dworker"
    while True:
        _, job = await load.request("GET", MPIJOBS.format(ns=namespace) + "/b5")
        conditions = (job or {}).get("status", {}).get("conditions", [])
        succeeded = any(c["type"] == "Succeeded" and c["status"] == "True" for c in conditions)
        _, pods = await load.request("GET", f"/api/v1/namespaces/{namespace}/pods{selector}")
        if succeeded and not pods["items"]:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"the W={workers} job of {namespace} did not succeed and clean up in {limit} s")
        await asyncio.sleep(0.5)
    # The audit backend writes in batches: count until the figure has not moved for 3 s.
    counts, agents = count_writes(audit_log, namespace, offset)
    stable_since = time.monotonic()
    while time.monotonic() - stable_since < 3:
        await asyncio.sleep(0.5)
        again, agents = count_writes(audit_log, namespace, offset)
        if again != counts:
            counts, stable_since = again, time.monotonic()
    await delete_namespace(load, namespace, limit=600)
    return {"workers": workers, "writes": dict(counts), "user_agents": dict(agents)}


def log_size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def count_writes(audit_log: Path, namespace: str, offset: int) -> tuple[collections.Counter[str],
                                                                         collections.Counter[str]]:
    """Writes in ``namespace`` by user agents starting ``mpi-operator`` (both operators' agents do): by verb and
    resource, and by user agent."""
    counts: collections.Counter[str] = collections.Counter()
    agents: collections.Counter[str] = collections.Counter()
    for event in audit_events(audit_log, offset=offset):
        ref = event.get("objectRef") or {}
        agent = str(event.get("userAgent", ""))
        if (agent.startswith("mpi-operator") and ref.get("namespace") == namespace
                and event.get("verb") in WRITE_VERBS and event.get("stage") == "ResponseComplete"):
            counts[f"{event['verb']} {resource_of(event)}"] += 1
            agents[agent] += 1
    return counts, agents


async def warm_up(load: ApiLoad, namespace: str, pid: int, alive: Callable[[], bool], limit: float) -> float:
    """POST a W=1 job until its launcher Job appears (the operator holds the Lease and its caches are synced);
    seconds from now. Raises when the process exits."""
    began = time.perf_counter()
    await create_namespace(load, namespace)
    status, answer = await load.request("POST", MPIJOBS.format(ns=namespace), mpijob("warm", 1,
                                                                                      launcher_labels=HANG))
    if status != 201:
        raise RuntimeError(f"MPIJob POST: {status} {answer}")
    while True:
        _, jobs = await load.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs")
        if jobs["items"]:
            break
        if not alive():
            raise RuntimeError(f"the operator (pid {pid}) exited before its first job")
        if time.perf_counter() - began > limit:
            raise TimeoutError(f"no launcher Job {limit} s after the first MPIJob")
        await asyncio.sleep(0.05)
    ready = time.perf_counter() - began
    await delete_namespace(load, namespace, limit=600)
    return ready
