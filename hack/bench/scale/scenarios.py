"""The scale scenarios, each measured from things that cannot stop early (the audit log, LISTs after the fact):

- ``operator_run``: MPIJobs POSTed at once, measured until every pod is Running and the operator idle again;
- ``floor_run``: the API server's own floor for the same pods (C_sched): a raw client creating the worker pods the
  reconciler would (32 in flight), which the scheduler binds and kwok starts meanwhile;
- ``overflow_run``: a job whose ConfigMap cannot fit in 1 MiB: refused at the POST, or what the operator does.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hack.bench.apiload import ApiLoad
from hack.bench.peer.measure import create_namespace, log_size
from hack.bench.peer.operators import Operator
from hack.bench.procstat import ProcessSample
from hack.bench.scale.audit import OPERATOR_AGENT, from_audit
from hack.devcluster.mpijobs import mpijob
from reconciler.mpijob.builders import build_service, build_worker
from shared.api import MPIJob, defaulted_dict

HANG = {"test.mpijob/outcome": "hang"}  # kwok never completes such a launcher: the job stays live
MPIJOBS = "/apis/kubeflow.org/v2beta1/namespaces/{ns}/mpijobs"
WORKER = "training.kubeflow.org/job-role=worker"
IDLE_CPU = 0.05  # CPU-seconds in one second under which the operator counts as idle
FLOOR_AGENT = "Python/"  # aiohttp's user agent: the raw client of the floor
IN_FLIGHT = 32  # concurrent POSTs of the load generator
ComponentsCpu = Callable[[], dict[str, float]]  # the CPU-seconds so far of each control-plane component


def no_components() -> dict[str, float]:
    return {}


def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU-seconds each component spent between two samples (those alive at both)."""
    return {name: round(after[name] - before[name], 2) for name in before if name in after}


async def not_running(load: ApiLoad, namespace: str) -> int:
    """Whether any pod of the namespace is not Running (0 or 1: one LIST of at most one pod)."""
    status, listing = await load.request("GET", f"/api/v1/namespaces/{namespace}/pods"
                                                "?fieldSelector=status.phase!%3DRunning&limit=1")
    if status != 200:
        raise RuntimeError(f"LIST pods of {namespace}: {status} {listing}")
    return len(listing["items"])


async def count_pods(load: ApiLoad, namespace: str, selector: str = "") -> int:
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


async def fresh_namespace(load: ApiLoad, audit_log: Path, namespace: str) -> int:
    """The namespace created; the audit log's offset after its creation was flushed (batches of 1 s)."""
    await create_namespace(load, namespace)
    await asyncio.sleep(2)
    return log_size(audit_log)


async def all_running_at(load: ApiLoad, audit_log: Path, offset: int, namespace: str, expected: int, agent: str,
                         limit: float, tick: Callable[[], None] = lambda: None) -> float:
    """The wall-clock time when ``expected`` pods of ``agent`` were created (audit log) and no pod of the namespace
    was not Running (polled each second, so to within a second); ``tick`` runs at every poll."""
    deadline = time.monotonic() + limit
    while True:
        tick()
        polled = time.time()
        if from_audit(audit_log, offset, {namespace}, agent)["created"] >= expected and not await not_running(
                load, namespace):
            return polled
        if time.monotonic() > deadline:
            raise TimeoutError(f"not every pod of {namespace} Running {limit} s after the first create")
        await asyncio.sleep(1)


async def operator_run(load: ApiLoad, operator: Operator, audit_log: Path, namespace: str, jobs: int, workers: int,
                       limit: float, creator: str = OPERATOR_AGENT, hang_workers: bool = False,
                       clean_up: bool = True, components: ComponentsCpu = no_components) -> dict[str, Any]:
    """``jobs`` MPIJobs of ``workers`` workers POSTed at once (32 requests in flight) into ``namespace``, measured
    until every pod is Running and the operator idle; see hack/bench/scale/__init__.py for what is measured. The
    pod creates counted are those of ``creator`` (a user agent prefix): the operator's, or kube-controller-manager's
    when its Job controller makes the workers (the IndexedJob backend), whose requests are then kept too. With
    ``hang_workers`` the workers carry ``HANG`` too: kwok completes every pod a Job owns unless told otherwise.
    Without ``clean_up`` the namespace stays (the last run on a control plane about to be stopped). ``components``
    samples the control plane's CPU: what each component spent from the first POST until every pod ran is kept."""
    offset = await fresh_namespace(load, audit_log, namespace)
    pid = operator.pid
    before, control_plane = ProcessSample.of(pid), components()
    began = time.time()
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def post(index: int) -> None:
        name = job_name(jobs, index)
        async with gate:
            status, answer = await load.request("POST", MPIJOBS.format(ns=namespace),
                                                bench_job(name, workers, hang_workers))
        if status != 201:
            raise RuntimeError(f"MPIJob POST: {status} {answer}")

    await asyncio.gather(*(post(index) for index in range(jobs)))
    expected = jobs * workers
    peak_rss = 0

    def sample() -> None:
        nonlocal peak_rss
        if not operator.alive():
            raise RuntimeError(f"the operator (pid {pid}) exited")
        peak_rss = max(peak_rss, ProcessSample.of(pid).rss_kb)

    running_at = await all_running_at(load, audit_log, offset, namespace, expected, creator, limit, sample)
    control_plane = spent(control_plane, components())
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
    made = audit if creator == OPERATOR_AGENT else from_audit(audit_log, offset, {namespace}, creator)
    workers_found = await count_pods(load, namespace, WORKER)
    slices, endpoints = await endpoint_slices(load, namespace)
    cpu = after.cpu_seconds - before.cpu_seconds
    first = audit["first_post"] if audit["first_post"] != math.inf else began
    result = {
        "jobs": jobs, "workers": workers, "pods": expected, "workers_found": workers_found,
        "all_created": made["last_create"] - first, "all_running": running_at - first,
        "created": made["created"], "already_exists": made["already_exists"], "create_codes": made["create_codes"],
        "requests": audit["requests"], "configmap_writes": audit["configmap_writes"],
        "configmap_bytes": audit["configmap_bytes"], "cpu": cpu, "cpu_per_1000_pods": cpu * 1000 / expected,
        "peak_rss_kb": max(peak_rss, after.rss_kb), "rss_kb": after.rss_kb, "hwm_kb": after.peak_rss_kb,
        "endpoint_slices": slices, "endpoints": endpoints, "control_plane_cpu": control_plane,
    }
    if made is not audit:
        result.update(worker_creator=creator, creator_requests=made["requests"],
                      operator_pod_creates=audit["created"])
    if clean_up:
        await delete_namespace(load, namespace, limit=1800)
    return result


def bench_job(name: str, workers: int, hang_workers: bool = False) -> dict[str, Any]:
    """The MPIJob a scenario POSTs: its launcher runs until deleted, and its workers too with ``hang_workers``."""
    job = mpijob(name, workers, launcher_labels=HANG)
    if hang_workers:
        job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"] = {"labels": dict(HANG)}
    return job


def job_name(jobs: int, index: int) -> str:
    """The name of job ``index`` of a scenario of ``jobs`` jobs, as ``operator_run`` POSTs it."""
    return "bench" if jobs == 1 else f"j{index:04d}"


def floor_jobs(namespace: str, jobs: int, workers: int) -> list[MPIJob]:
    """The scenario's MPIJobs as the API server would hold them (defaulted), each with a made-up uid."""
    return [MPIJob.model_validate(defaulted_dict({**mpijob(job_name(jobs, index), workers), "metadata": {
        "name": job_name(jobs, index), "namespace": namespace, "uid": f"floor-{index}"}})) for index in range(jobs)]


def without_owner(built: dict[str, Any]) -> dict[str, Any]:
    """An object the reconciler builds, without its owner (the garbage collector would delete an object whose owner
    does not exist)."""
    return {**built, "metadata": {**built["metadata"], "ownerReferences": []}}


def floor_pods(jobs: list[MPIJob], workers: int) -> Callable[[int], dict[str, Any]]:
    """Pod ``index`` of the jobs' worker pods as the reconciler builds them: worker ``index % workers`` of job
    ``index // workers``, without its owner."""
    def pod(index: int) -> dict[str, Any]:
        return without_owner(build_worker(jobs[index // workers], index % workers))

    return pod


def floor_services(jobs: list[MPIJob]) -> list[dict[str, Any]]:
    """Each job's headless Service as the reconciler builds it, without its owner."""
    return [without_owner(build_service(job)) for job in jobs]


async def floor_run(load: ApiLoad, audit_log: Path, namespace: str, jobs: int, workers: int,
                    limit: float, services: bool = False, components: ComponentsCpu = no_components) -> dict[str, Any]:
    """C_sched for the pods of ``jobs`` jobs of ``workers`` workers: a raw client creates them, 32 in flight, timed
    from its first create to its last (audit log) and to every pod Running, as the operators are from their POST.
    With ``services`` each job's headless Service is created first, as an operator does: the Service is what makes
    kube-controller-manager keep EndpointSlices of the pods and kube-scheduler spread them (its default
    PodTopologySpread constraints apply to pods a Service selects). ``components`` as for ``operator_run``."""
    pods, built = jobs * workers, floor_jobs(namespace, jobs, workers)
    offset = await fresh_namespace(load, audit_log, namespace)
    control_plane = components()
    if services:
        for service in floor_services(built):
            status, answer = await load.request("POST", f"/api/v1/namespaces/{namespace}/services", service)
            if status != 201:
                raise RuntimeError(f"Service POST: {status} {answer}")
    answered = await load.closed_loop(f"/api/v1/namespaces/{namespace}/pods", floor_pods(built, workers), pods,
                                      IN_FLIGHT)
    if answered.errors:
        raise RuntimeError(f"{answered.errors} of {pods} pod creates failed")
    running_at = await all_running_at(load, audit_log, offset, namespace, pods, FLOOR_AGENT, limit)
    control_plane = spent(control_plane, components())
    await asyncio.sleep(2)  # the audit log's last batch
    audit = from_audit(audit_log, offset, {namespace}, FLOOR_AGENT)
    first = audit["first_create"]
    result = {"jobs": jobs, "workers": workers, "pods": pods, "created": audit["created"],
              "already_exists": audit["already_exists"], "all_created": audit["last_create"] - first,
              "all_running": running_at - first, "creates_per_second": pods / (audit["last_create"] - first),
              "control_plane_cpu": control_plane}
    if services:
        result["endpoint_slices"], result["endpoints"] = await endpoint_slices(load, namespace)
    await delete_namespace(load, namespace, limit=1800)
    return result


def long_names(workers: int) -> tuple[str, str]:
    """A 30-character namespace and a 40-character job name, as real ones often are (team-project-env, model-size-
    dataset-date): with them the ConfigMap of ``workers`` workers passes 1 MiB past 3,877 workers."""
    return f"overflow-{workers}-".ljust(30, "x"), "llama-finetune-ablation-lr3e-4-2026-12-0"


async def overflow_run(load: ApiLoad, namespace: str, name: str, workers: int, watch_for: float,
                       log: Path) -> dict[str, Any]:
    """One MPIJob whose ConfigMap cannot fit: the POST's answer and, when it was admitted, what the operator shows
    until the job is Failed or the operator's log says a ConfigMap was refused (at most ``watch_for`` seconds): the
    seconds it took, the pods created by then, the job's conditions, its Warning events and that log line. (The Go
    operator creates the ConfigMap before any worker runs, when discover_hosts.sh is still empty and the hostfile
    alone fits, then every worker; it is refused when it adds the Running workers to discover_hosts.sh.)"""
    await create_namespace(load, namespace)
    began = time.monotonic()
    status, answer = await load.request("POST", MPIJOBS.format(ns=namespace),
                                        mpijob(name, workers, launcher_labels=HANG))
    result: dict[str, Any] = {"workers": workers, "namespace_length": len(namespace), "name_length": len(name),
                              "post_code": status}
    if status != 201:
        result["post_message"] = str((answer or {}).get("message", ""))
    else:
        conditions: list[dict[str, Any]] = []
        line = ""
        while time.monotonic() - began < watch_for:
            _, job = await load.request("GET", f"{MPIJOBS.format(ns=namespace)}/{name}")
            conditions = (job.get("status") or {}).get("conditions") or []
            line = first_config_map_error(log)
            if line or any(c["type"] == "Failed" and c["status"] == "True" for c in conditions):
                break
            await asyncio.sleep(1)
        result["seconds_watched"] = round(time.monotonic() - began, 1)
        result["pods"] = await count_pods(load, namespace)
        result["conditions"] = [{k: c.get(k) for k in ("type", "status", "reason", "message")} for c in conditions]
        _, events = await load.request("GET", f"/api/v1/namespaces/{namespace}/events"
                                              f"?fieldSelector=involvedObject.name%3D{name}")
        result["warnings"] = sorted({f"{e['reason']}: {e['message']}" for e in events["items"]
                                     if e.get("type") == "Warning"})
        result["log_line"] = line
    await delete_namespace(load, namespace, limit=1800)
    return result


def first_config_map_error(log: Path) -> str:
    """The operator log's first line that says a ConfigMap was refused for its size, shortened; empty for none."""
    for line in log.read_text(errors="replace").splitlines():
        if "ConfigMap" in line and ("Too long" in line or "at most" in line or "too large" in line.lower()):
            return line[:400]
    return ""
