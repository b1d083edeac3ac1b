"""Outages without crash loops (issue 29): kube-apiserver stopped for a minute under a running reconciler,
and a reconciler started while kube-apiserver is down.

The reconciler runs as the fault suite runs it: its default flags (leader election on), under the supervisor
with kubelet's crash-loop back-off (the first restart at once, then 10 s doubling to 5 minutes) and the
shipped Deployment's liveness probe on ``/healthz`` (hack/devcluster/supervisor.py), so that an exit, or a
liveness failure, would cost what it costs in a cluster.

The one-minute outage: MPIJobs exist and are being reconciled (jobs Running, one job's workers being created)
when kube-apiserver is stopped (SIGTERM) and started again a minute later (``OUTAGE``, which says what that
outlasts). The Lease cannot be renewed, so the reconciler stops reconciling 5 s in, drops its caches and work
queue and campaigns again in-process; once the
API server is back it must lead again within 15 s (measured from the API server's ``/readyz`` answering 200
to the reconciler's "became leader" line, printed with the time to its caches synced), with no process
restart and no liveness failure. Every job's children are then compared as whole lists of (kind, name, uid):
the children that existed before the outage are the same objects after it, and each job has exactly its
Service, ConfigMap, Secret, launcher Job, one launcher pod and workers 0..W-1; from the audit log, nothing was
created twice and no worker is missing or foreign. Then the jobs finish and nothing is left once they are
deleted. The full version (``make faults``) runs the seeded mixed workload of the kill suite across the outage.

Start-up with the API server down: kube-apiserver is stopped before the reconciler starts. The process waits
with capped exponential back-off, one log line per attempt, ``/healthz`` 200 and ``/readyz`` 503 naming the
API server; once the API server is back it becomes ready and reconciles a job, in the same process.

How long each wait is, and why: kube-apiserver fails requests within 3 s of its SIGTERM, then hangs in its
graceful shutdown until the harness SIGKILLs it 20 s after the SIGTERM. ``OUTAGE`` and ``STARTUP_OUTAGE`` count
from the SIGTERM to the new process's start (they used to count from the old one's exit, adding those 20 s), and
each says what it outlasts (tests/faults/test_outage_bounds.py checks them against the code that sets each bound).
Every other wait is a condition with a deadline; ``GC_TIMEOUT`` is only a deadline.
"""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.processes import http_get
from hack.devcluster.rest import ApiError
from hack.devcluster.supervisor import LIVENESS, LOCK_NAMESPACE, SupervisedReconciler, ensure_namespace, tail
from hack.devcluster.wait import WaitTimeoutError, wait_for
from tests.faults.conftest import record
from tests.faults.workload import (
    CHILD_RESOURCES,
    Driver,
    JobPlan,
    audit_in,
    audit_size,
    condition,
    core_path,
    create_namespace,
    delete_all_and_wait_for_gc,
    delete_namespace,
    duplicates,
    lost_or_foreign_workers,
    mpijobs_path,
    plan_jobs,
    pods_created_while_suspended,
    wait_workers_left,
    workers_now,
    write_summary,
    writes_by_reconciler,
    wrong_states,
)

JSON = dict[str, Any]
# Seconds from kube-apiserver's SIGTERM to its new process's start. The outage has to outlast, from the SIGTERM: the
# renew deadline (5 s), so that the Lease is lost mid-outage; the Lease duration (15 s), so that the record written
# before the stop has expired when the API server returns; the reconciler's Lease attempts (every 3 s, jittered up
# to 3.6 s), so that leading again is measured from a campaign that kept failing (its informers, whose watch
# retries back off to 30 s, go with the Lease 5 s in); and the liveness probe: were /healthz to fail once Lease
# requests had failed for a Lease duration (as it does for refused ones), it would fail from 5 + 15 = 20 s on, and
# the probe (every 10 s, 3 failures) would restart the process by 20 + 30 = 50 s. 60 s keeps every one of these
# bounds with 10 s to spare (it was 120 s after the old process's exit, about 140 s from the SIGTERM).
OUTAGE = 60.0
# Seconds from kube-apiserver's SIGTERM to its new process's start in the start-up case; the reconciler starts once
# the API server fails a request (within 3 s of the SIGTERM). The start-up back-off (0.5 s doubling to 8 s, jitter
# 20 %) makes the 4 attempts checked within 3.5 s (4.2 s at the most), the fifth, whose wait
# is the cap, at 7.5 s (9 s) and the sixth, holding it, at 15.5 s (18.6 s); a process whose /healthz failed from its
# start would be restarted by the liveness probe (first probe after 10 s, then every 10 s, 3 failures) 30 s after it
# started: the test checks that the reconciler went that long without an API server. 40 s from the SIGTERM keeps
# that bound with about 10 s to spare (it was 30 s after the old process's exit, about 50 s from the SIGTERM).
STARTUP_OUTAGE = 40.0
LIVENESS_RESTART = LIVENESS.initial_delay + LIVENESS.period * (LIVENESS.failures - 1)  # seconds after a start
LEAD_WITHIN = 15.0  # seconds from the API server's return to the reconciler leading again
HANG = {"test.mpijob/outcome": "hang"}
# A deadline, not a wait (the test goes on as soon as the children are gone): kube-controller-manager's garbage
# collector took 40-120 s to delete them after the 2-minute outage (its informers come back with their own back-off,
# which grows with the outage); 10 s without one
GC_TIMEOUT = 300.0
Child = tuple[str, str, str]  # (resource, name, uid)


# ---- the reconciler's log
def log_time(line: str) -> float:
    """The wall-clock time (Unix seconds) of a logfmt line of the reconciler."""
    stamp = line.split("ts=", 1)[1].split(" ", 1)[0]
    return datetime.strptime(stamp.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def first_after(text: str, message: str, since: float) -> float | None:
    """When the first line with ``msg="message"`` (or ``msg=message``) logged at or after ``since`` was."""
    wanted = (f'msg="{message}"', f"msg={message} ")
    for line in text.splitlines():
        if line.startswith("ts=") and any(w in line + " " for w in wanted) and log_time(line) >= since:
            return log_time(line)
    return None


def count(text: str, message: str) -> int:
    return sum(f'msg="{message}"' in line or f"msg={message} " in line + " " for line in text.splitlines())


# ---- the outage
@dataclass
class Outage:
    """kube-apiserver stopped (SIGTERM) and started again ``down_for`` seconds after the SIGTERM (in a thread)."""

    cluster: LocalCluster
    down_for: float
    began: float = 0.0  # wall clock (time.time()) of the SIGTERM
    stopped_in: float = 0.0  # seconds the API server took to stop
    back: float = 0.0  # wall clock once /readyz answered 200 again
    error: BaseException | None = None
    _thread: threading.Thread | None = None

    def start(self) -> Outage:
        self.began = time.time()
        start_at = time.monotonic() + self.down_for
        self._thread = threading.Thread(target=self._run, args=(start_at,), name="apiserver-outage", daemon=True)
        self._thread.start()
        wait_for(self.api_down, timeout=60, interval=0.1, what="kube-apiserver to stop")
        return self

    def _run(self, start_at: float) -> None:
        try:
            self.cluster.restart("kube-apiserver", start_at=start_at)
            self.back = time.time()
            self.stopped_in = self.cluster.timings["kube-apiserver stop"]
        except BaseException as error:  # reported by wait()
            self.error = error

    def api_down(self) -> bool:
        try:
            self.cluster.rest.get("/version")
        except (OSError, ApiError):
            return True
        return False

    @property
    def over(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()

    def wait(self) -> None:
        assert self._thread is not None
        self._thread.join(timeout=self.down_for + 300)
        if self.error is not None:
            raise self.error
        assert self.back, "kube-apiserver did not come back"

    @property
    def restarted_at(self) -> float:
        """Wall clock when the API server process was started again."""
        return self.began + max(self.stopped_in, self.down_for)


@dataclass
class Recovery:
    """How the reconciler came back after the outage (seconds from the API server's /readyz 200)."""

    led_after: float
    synced_after: float
    lost_after: float  # seconds from the SIGTERM to the reconciler giving up the Lease
    led_after_start: float  # seconds from the new kube-apiserver process's start to leading again

    def describe(self) -> str:
        return (f"Lease lost {self.lost_after:.1f} s after the SIGTERM; leading again {self.led_after:+.1f} s and "
                f"caches synced {self.synced_after:+.1f} s after the API server's /readyz answered 200 "
                f"({self.led_after_start:.1f} s after its process started; negative: before the harness saw /readyz)")


def recovery(reconciler: SupervisedReconciler, outage: Outage) -> Recovery:
    text = reconciler.all_logs()
    lost = first_after(text, "leader election lost", outage.began)
    assert lost is not None, f"the reconciler never lost its Lease:\n{tail(text, 30)}"
    led = first_after(text, "became leader", lost)
    synced = first_after(text, "caches synced", lost)
    assert led is not None, tail(text, 30)
    assert synced is not None, tail(text, 30)
    return Recovery(led - outage.back, synced - outage.back, lost - outage.began, led - outage.restarted_at)


def probe_during(reconciler: SupervisedReconciler, outage: Outage) -> list[tuple[int, str, int, str]]:
    """/healthz and /readyz of the current run, every 5 s until the outage is over, from their first answer on
    (a process just started is not listening yet)."""
    seen: list[tuple[int, str, int, str]] = []
    while not outage.over:
        run = reconciler.current
        assert run is not None
        try:
            health = http_get(f"http://127.0.0.1:{run.health_port}/healthz")
            ready = http_get(f"http://127.0.0.1:{run.health_port}/readyz")
            seen.append((*health, *ready))
        except OSError:
            if seen:
                seen.append((0, "unreachable", 0, ""))
            else:
                time.sleep(0.1)
                continue
        for _ in range(50):
            if outage.over:
                break
            time.sleep(0.1)
    return seen


# ---- children, as whole lists
def children(cluster: LocalCluster, namespace: str) -> dict[str, list[Child]]:
    """Job name -> every child of that MPIJob in the namespace, sorted (resource, name, uid); the launcher pod
    is found through its Job."""
    owners: dict[str, str] = {}  # uid -> MPIJob name
    for job in cluster.rest.get(mpijobs_path(namespace))["items"]:
        owners[job["metadata"]["uid"]] = job["metadata"]["name"]
    launchers: dict[str, str] = {}  # launcher Job uid -> MPIJob name
    found: dict[str, list[Child]] = {name: [] for name in owners.values()}
    for plural in ("jobs", *[p for p in CHILD_RESOURCES if p != "jobs"]):
        for obj in cluster.rest.get(core_path(namespace, plural))["items"]:
            metadata = obj["metadata"]
            refs = [r for r in metadata.get("ownerReferences") or [] if r.get("controller")]
            owner = owners.get(refs[0]["uid"]) if refs else None
            if owner is None and refs and refs[0]["kind"] == "Job":
                owner = launchers.get(refs[0]["uid"])
            if owner is None:
                continue
            if plural == "jobs":
                launchers[metadata["uid"]] = owner
            found[owner].append((plural, metadata["name"], metadata["uid"]))
    return {name: sorted(items) for name, items in found.items()}


def wrong_children(found: dict[str, list[Child]], workers: dict[str, int]) -> dict[str, str]:
    """Per job, how its children differ from exactly one Service, ConfigMap, Secret, launcher Job and launcher
    pod, and workers 0..W-1 (a name twice would need two uids: names are unique, so a second copy shows as a
    second launcher pod or an unexpected name)."""
    wrong = {}
    for name, count_ in workers.items():
        want = sorted([("configmaps", f"{name}-config"), ("jobs", f"{name}-launcher"), ("secrets", f"{name}-ssh"),
                       ("services", name)] + [("pods", f"{name}-worker-{i}") for i in range(count_)])
        items = found.get(name, [])
        launcher_pods = [n for res, n, _ in items if res == "pods" and re.fullmatch(rf"{name}-launcher-\w+", n)]
        got = sorted((res, n) for res, n, _ in items if n not in launcher_pods)
        if got != want or len(launcher_pods) != 1:
            missing, unexpected = sorted(set(want) - set(got)), sorted(set(got) - set(want))
            wrong[name] = f"missing {missing[:5]}, unexpected {unexpected[:5]}, launcher pods {launcher_pods}"
    return wrong


def changed(before: dict[str, list[Child]], after: dict[str, list[Child]]) -> dict[str, str]:
    """Children that existed before the outage and are gone, or are another object (uid), after it."""
    problems = {}
    for name, items in before.items():
        now = set(after.get(name, []))
        gone = [child for child in items if child not in now]
        if gone:
            problems[name] = f"{len(gone)} children gone or replaced: {gone[:3]}"
    return problems


def all_running(cluster: LocalCluster, namespace: str, workers: dict[str, int]) -> bool:
    now = workers_now(cluster, namespace)
    jobs = {j["metadata"]["name"]: j for j in cluster.rest.get(mpijobs_path(namespace))["items"]}
    return all(now.get(name, 0) == count_ and condition(jobs[name], "Running") == "True"
               for name, count_ in workers.items())


def pod_phases(cluster: LocalCluster, namespace: str) -> dict[str, str]:
    """Each pod's phase and node, to say which component a stuck job waits for."""
    pods = cluster.rest.get(core_path(namespace, "pods"))["items"]
    return {p["metadata"]["name"]: f"{(p.get('status') or {}).get('phase')} on {p['spec'].get('nodeName')}"
            for p in pods}


def let_launchers_succeed(cluster: LocalCluster, namespace: str) -> None:
    pods = cluster.rest.get(core_path(namespace, "pods") + "?labelSelector=training.kubeflow.org/job-role=launcher")
    for pod in pods["items"]:
        cluster.rest.merge_patch(core_path(namespace, "pods") + f"/{pod['metadata']['name']}",
                                 {"metadata": {"labels": {"test.mpijob/outcome": "succeed"}}})


def all_succeeded(cluster: LocalCluster, namespace: str, names: list[str]) -> bool:
    jobs = {j["metadata"]["name"]: j for j in cluster.rest.get(mpijobs_path(namespace))["items"]}
    return all(condition(jobs[name], "Succeeded") == "True" for name in names) and not workers_now(cluster, namespace)


def check_one_process(reconciler: SupervisedReconciler) -> None:
    assert reconciler.unexpected_exits == [], [f"run {e.run} {e.reason} (exit {e.code}) after {e.after:.0f} s:\n"
                                               f"{tail(e.tail, 8)}" for e in reconciler.unexpected_exits]
    assert len(reconciler.runs) == 1


# ---- the tests
@pytest.mark.timeout(900)
def test_a_one_minute_api_server_outage_costs_no_restart_and_duplicates_nothing(fault_cluster: LocalCluster,
                                                                                tmp_path: Path) -> None:
    cluster = fault_cluster
    namespace = create_namespace(cluster, f"faults-outage-{uuid.uuid4().hex[:5]}")
    steady = {f"steady-{i}": workers for i, workers in enumerate((1, 4, 16))}
    big, big_workers = "creating", 256
    workers = {**steady, big: big_workers}
    reconciler = SupervisedReconciler(cluster, tmp_path / "reconciler", liveness=True)
    offset = audit_size(cluster)
    try:
        with reconciler:
            reconciler.wait_synced()
            for name, count_ in steady.items():
                cluster.rest.create(mpijobs_path(namespace), mpijob(name, count_, launcher_labels=HANG))
            wait_for(lambda: all_running(cluster, namespace, steady), timeout=120, interval=0.5,
                     what="the steady jobs Running")
            before = children(cluster, namespace)
            cluster.rest.create(mpijobs_path(namespace), mpijob(big, big_workers, launcher_labels=HANG))
            at_stop = wait_for(lambda: (n := workers_now(cluster, namespace).get(big, 0)) >= big_workers // 8 and n,
                               timeout=120, interval=0.05, what=f"an eighth of the {big_workers} workers")
            outage = Outage(cluster, OUTAGE).start()
            probes = probe_during(reconciler, outage)
            outage.wait()
            wait_for(lambda: count(reconciler.all_logs(), "caches synced") >= 2, timeout=60, interval=0.2,
                     what="the reconciler to lead and sync again")
            came_back = recovery(reconciler, outage)
            wait_for(lambda: all_running(cluster, namespace, workers), timeout=180, interval=0.5,
                     what="every job Running with all its workers after the outage")
            after = children(cluster, namespace)
            let_launchers_succeed(cluster, namespace)
            wait_for(lambda: all_succeeded(cluster, namespace, list(workers)), timeout=180, interval=0.5,
                     what="every job Succeeded, its workers deleted")
            orphans, gc_seconds = delete_all_and_wait_for_gc(cluster, namespace, GC_TIMEOUT)
        events = audit_in(cluster, namespace, offset)
        plans = [JobPlan(name, count_, "OpenMPI", "Running", False, False, False, False, 0, 0)
                 for name, count_ in workers.items()]
        writes = writes_by_reconciler(events)
        healthz = sorted({f"{status}" for status, *_ in probes})
        readyz = sorted({f"{ready} " + re.sub(r"\d+ s", "N s", body.splitlines()[0] if body else "")[:75]
                         for *_, ready, body in probes})
        record(f"API server outage (started again {OUTAGE:.0f} s after the SIGTERM; stopped in "
               f"{outage.stopped_in:.1f} s, ready {outage.back - outage.restarted_at:.1f} s after its restart) with "
               f"{len(workers)} jobs Running or starting ({at_stop}/{big_workers} workers of '{big}' created at the "
               f"stop): {came_back.describe()}")
        record(f"  reconciler runs {len(reconciler.runs)}, exits {len(reconciler.unexpected_exits)}, "
               f"'leader election lost' {count(reconciler.all_logs(), 'leader election lost')}, during the outage "
               f"/healthz {healthz}, /readyz {readyz}")
        record(f"  children compared (kind, name, uid): {sum(map(len, before.values()))} before, "
               f"{sum(map(len, after.values()))} after; GC {gc_seconds:.0f} s; {sum(writes.values())} writes: "
               f"{write_summary(writes)}")
        check_one_process(reconciler)
        assert came_back.led_after <= LEAD_WITHIN, came_back.describe()
        assert all(status == 200 for status, *_ in probes), probes
        assert any(ready == 503 and "lease" in body for *_, ready, body in probes), probes
        assert changed(before, after) == {}
        assert wrong_children(after, workers) == {}
        assert duplicates(events) == {}
        assert lost_or_foreign_workers(events, plans) == {}
        assert orphans == []
    finally:
        delete_namespace(cluster, namespace)


@pytest.mark.timeout(300)
def test_started_while_the_api_server_is_down_it_waits_and_becomes_ready(fault_cluster: LocalCluster,
                                                                         tmp_path: Path) -> None:
    cluster = fault_cluster
    namespace = create_namespace(cluster, f"faults-startup-{uuid.uuid4().hex[:5]}")
    ensure_namespace(cluster, LOCK_NAMESPACE)  # the supervisor cannot, with the API server down
    reconciler = SupervisedReconciler(cluster, tmp_path / "reconciler", liveness=True, create_lock_namespace=False)
    outage = Outage(cluster, STARTUP_OUTAGE).start()
    try:
        started = time.time()
        with reconciler:
            probes = probe_during(reconciler, outage)
            outage.wait()
            reconciler.wait_synced(timeout=60)
            run = reconciler.current
            assert run is not None
            wait_for(lambda: http_get(f"http://127.0.0.1:{run.health_port}/readyz") == (200, "ok"), timeout=30,
                     interval=0.2, what="/readyz 200")
            ready_at = time.time()
            cluster.rest.create(mpijobs_path(namespace), mpijob("after-start", 2, launcher_labels=HANG))
            # kube-controller-manager, kube-scheduler and kwok reconnect on client-go's reflector backoff (up to 30 s
            # each after a 40 s outage, one after the other for a launcher pod), so the job's first minute can pass
            # before the Job controller even sees the launcher Job: the deadline leaves room for all three.
            try:
                wait_for(lambda: all_running(cluster, namespace, {"after-start": 2}), timeout=150, interval=0.5,
                         what="the job Running")
            except WaitTimeoutError as timeout:
                raise WaitTimeoutError(f"{timeout}; pods then: {pod_phases(cluster, namespace)}") from timeout
            text = reconciler.log_text()
        attempts = [line for line in text.splitlines() if 'msg="waiting for the API server"' in line]
        numbers = [int(m[1]) for line in attempts if (m := re.search(r" attempt=(\d+)", line))]
        delays = [float(m[1]) for line in attempts if (m := re.search(r" retry_in_s=([0-9.]+)", line))]
        reasons = Counter(next((kind for kind in ("cannot reach", "is not ready", "answered") if kind in line), "other")
                          for line in attempts)
        reachable = first_after(text, "API server reachable", outage.began)
        synced = first_after(text, "caches synced", outage.began)
        assert reachable is not None, tail(text, 30)
        assert synced is not None, tail(text, 30)
        record(f"start-up with the API server down (started again {outage.down_for:.0f} s after the SIGTERM; the "
               f"reconciler started {started - outage.began:.1f} s after it): {len(attempts)} attempts "
               f"(waits {', '.join(f'{d:.1f}' for d in delays)} s), reasons {dict(reasons)}; API server ready again at "
               f"+{outage.back - outage.began:.1f} s; reconciler reached it {reachable - outage.back:+.1f} s later, "
               f"caches synced {synced - outage.back:+.1f} s, /readyz 200 {ready_at - outage.back:+.1f} s")
        check_one_process(reconciler)
        # long enough that a /healthz failing from the start would have cost a liveness restart (STARTUP_OUTAGE)
        assert outage.back - started >= LIVENESS_RESTART, (outage.back - started, LIVENESS_RESTART)
        assert numbers == list(range(1, len(numbers) + 1)), attempts  # one line per attempt
        assert len(numbers) >= 4, attempts
        assert all(d <= 8 * 1.2 for d in delays), delays
        assert all(status == 200 for status, *_ in probes), probes
        assert any(ready == 503 and body.startswith("api: waiting for the API server") for *_, ready, body in probes), \
            probes
        assert "CRD doesn't exist" not in text
        assert "python -m reconciler: error:" not in text
    finally:
        if not outage.over:
            outage.wait()
        delete_namespace(cluster, namespace)


@pytest.mark.faults
@pytest.mark.timeout(1500)
def test_a_one_minute_api_server_outage_in_a_mixed_workload(fault_cluster: LocalCluster, rng: random.Random,
                                                            tmp_path: Path) -> None:
    """The kill suite's seeded mixed workload (sizes, implementations, policies, suspended and failing jobs),
    with kube-apiserver stopped for a minute (``OUTAGE``) 20 s into it instead of the kills."""
    cluster = fault_cluster
    namespace = create_namespace(cluster, f"faults-outage-mix-{uuid.uuid4().hex[:5]}")
    plans = plan_jobs(rng, 16, spread=40, max_workers=128)
    reconciler = SupervisedReconciler(cluster, tmp_path / "reconciler", liveness=True)
    outages: list[Outage] = []

    def tick(elapsed: float) -> None:
        if not outages and elapsed >= 20:
            outages.append(Outage(cluster, OUTAGE).start())
            outages[0].wait()

    try:
        with reconciler:
            reconciler.wait_synced()
            outcome = Driver(cluster, namespace, plans, tick=tick).run(timeout=900)
            assert outages, "the jobs finished before the outage"
            came_back = recovery(reconciler, outages[0])
            problems: dict[str, Any] = {"wrong terminal state": wrong_states(cluster, namespace, plans),
                                        "workers left": wait_workers_left(cluster, namespace, plans)}
            orphans, gc_seconds = delete_all_and_wait_for_gc(cluster, namespace, GC_TIMEOUT)
            problems["orphans"] = orphans
        events = audit_in(cluster, namespace, outcome.audit_offset)
        problems["duplicates"] = duplicates(events)
        problems["lost or foreign workers"] = lost_or_foreign_workers(events, plans)
        problems["pods of suspended jobs"] = pods_created_while_suspended(events, plans, outcome)
        writes = writes_by_reconciler(events)
        record(f"API server outage in a mixed workload ({len(plans)} jobs, {sum(p.workers for p in plans)} workers, "
               f"{OUTAGE:.0f} s down 20 s in): {came_back.describe()}; all terminal after {outcome.seconds:.0f} s, "
               f"GC {gc_seconds:.0f} s, reconciler runs {len(reconciler.runs)}; {sum(writes.values())} writes")
        record("  problems: " + ", ".join(f"{k}: {len(v)}" for k, v in problems.items()))
        check_one_process(reconciler)
        assert came_back.led_after <= LEAD_WITHIN, came_back.describe()
        bad = {k: v for k, v in problems.items() if v}
        assert not bad, f"{bad} (FAULT_SEED reproduces the run; jobs: " + "; ".join(p.describe() for p in plans) + ")"
    finally:
        delete_namespace(cluster, namespace)
