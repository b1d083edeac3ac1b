"""The reconciler SIGKILLed at random points of a mixed workload, restarted each time (issue 7).

A seeded generator draws the jobs (sizes, MPI implementations, cleanPodPolicy, launcherCreationPolicy,
runLauncherAsWorker, created suspended and resumed, failing launchers) and the kill points: some
during start-up (lease wait, cache sync), most a random time after the caches synced. The same jobs
then run again in another namespace without kills, and the reconciler's writes of both runs are
compared: the difference is what the restarts cost. Checks, from the cluster and the audit log: every
job in its right terminal state; every object created once, every worker name exactly once; no pod
of a suspended job before it was resumed; the workers each cleanPodPolicy leaves; nothing left once
the MPIJobs are deleted and the garbage collector ran; the reconciler never exits on its own.
"""

from __future__ import annotations

import collections
import random
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.supervisor import SupervisedReconciler, tail
from tests.faults.conftest import record
from tests.faults.workload import (
    Driver,
    JobPlan,
    Outcome,
    audit_in,
    core_path,
    create_namespace,
    delete_all_and_wait_for_gc,
    delete_namespace,
    duplicates,
    event_reasons,
    lost_or_foreign_workers,
    percentile,
    plan_jobs,
    pods_created_while_suspended,
    unanswered_creates,
    wait_workers_left,
    write_summary,
    writes_by_reconciler,
    wrong_states,
)

Problems = list[str] | dict[str, str] | dict[str, int]
CYCLE = 22.0  # seconds from one SIGKILL to the next: the Lease (15 s) expires, start-up, a random delay


@dataclass
class Killer:
    """Kills the reconciler at the planned points: ("start", s) is s seconds after a run started,
    ("synced", s) s seconds after its caches synced."""

    reconciler: SupervisedReconciler
    cluster: LocalCluster
    namespace: str
    points: list[tuple[str, float]]
    landed: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return len(self.landed) == len(self.points)

    def tick(self, _: float) -> None:
        if self.finished:
            return
        mode, delay = self.points[len(self.landed)]
        run = self.reconciler.current
        assert run is not None
        since = time.monotonic() - run.started if mode == "start" else self.reconciler.synced_for()
        if since is None or since < delay:
            return
        pods = len(self.cluster.rest.get(core_path(self.namespace, "pods"))["items"])
        synced = self.reconciler.synced_for()
        number = self.reconciler.kill()
        state = "reconciling" if synced is not None else "starting (Lease or cache sync)"
        self.landed.append(f"run {number} killed {delay:.1f} s after its {'start' if mode == 'start' else 'cache sync'}"
                           f", {state}, {pods} pods in the namespace")


def kill_points(rng: random.Random, count: int) -> list[tuple[str, float]]:
    return [("start", round(rng.uniform(0.0, 3.0), 2)) if rng.random() < 0.25
            else ("synced", round(rng.uniform(0.0, 5.0), 2)) for _ in range(count)]


@dataclass
class RunResult:
    outcome: Outcome
    writes: dict[str, int]
    problems: dict[str, Problems]
    gc_seconds: float
    kills: list[str]
    exits: int
    events: dict[str, int]
    unanswered: int


def run_once(cluster: LocalCluster, work_dir: Path, namespace: str, plans: list[JobPlan],
             points: list[tuple[str, float]], timeout: float) -> RunResult:
    create_namespace(cluster, namespace)
    reconciler = SupervisedReconciler(cluster, work_dir)
    try:
        with reconciler:
            reconciler.wait_synced()
            killer = Killer(reconciler, cluster, namespace, points)
            driver = Driver(cluster, namespace, plans, tick=killer.tick)
            outcome = driver.run(timeout)
            while not killer.finished:  # kills planned after the last job finished still happen
                killer.tick(0.0)
                time.sleep(0.2)
            reconciler.wait_synced()
            problems: dict[str, Problems] = {"wrong terminal state": wrong_states(cluster, namespace, plans),
                                             "workers left": wait_workers_left(cluster, namespace, plans)}
            reasons = event_reasons(cluster, namespace)
            orphans, gc_seconds = delete_all_and_wait_for_gc(cluster, namespace)
            problems["orphans"] = orphans
        events = audit_in(cluster, namespace, outcome.audit_offset)
        problems["duplicates"] = duplicates(events)
        problems["lost or foreign workers"] = lost_or_foreign_workers(events, plans)
        problems["pods of suspended jobs"] = pods_created_while_suspended(events, plans, outcome)
        problems["unexpected exits"] = [f"run {e.run} exit {e.code} after {e.after:.1f}s:\n{tail(e.tail, 8)}"
                                        for e in reconciler.unexpected_exits]
        return RunResult(outcome, dict(writes_by_reconciler(events)), problems, gc_seconds, killer.landed,
                         len(reconciler.unexpected_exits), dict(reasons), unanswered_creates(events))
    finally:
        delete_namespace(cluster, namespace)


def kill_suite(cluster: LocalCluster, rng: random.Random, tmp_path: Path, *, jobs: int, kills: int,
               max_workers: int, timeout: float) -> None:
    spread = max(20.0, 0.7 * CYCLE * kills)
    plans = plan_jobs(rng, jobs, spread=spread, max_workers=max_workers)
    points = kill_points(rng, kills)
    suffix = uuid.uuid4().hex[:5]
    total = sum(p.workers for p in plans)
    record(f"kill suite: {jobs} jobs, {total} workers (sizes {sorted(p.workers for p in plans)}), "
           f"created over {spread:.0f} s; {sum(p.suspended for p in plans)} suspended then resumed, "
           f"{sum(p.fails for p in plans)} failing, {sum(p.wait_for_workers for p in plans)} WaitForWorkersReady, "
           f"{sum(p.launcher_as_worker for p in plans)} runLauncherAsWorker")
    killed = run_once(cluster, tmp_path / "killed", f"faults-kills-{suffix}", plans, points, timeout)
    baseline = run_once(cluster, tmp_path / "baseline", f"faults-nokill-{suffix}", plans, [], timeout)
    for label, result in (("with kills", killed), ("without kills", baseline)):
        durations = result.outcome.durations()
        record(f"  {label}: {len(result.kills)} kills, {result.exits} unexpected exits, "
               f"{result.outcome.seconds:.0f} s to all terminal (per job p50 {percentile(durations, 0.5):.1f} s, "
               f"max {max(durations):.1f} s), GC {result.gc_seconds:.0f} s, "
               f"{sum(result.writes.values())} reconciler writes")
        record(f"    writes: {write_summary(collections.Counter(result.writes))}; creates answered 5xx (in flight "
               f"at a kill): {result.unanswered}")
        record(f"    MPIJob events: {write_summary(collections.Counter(result.events))}")
        record("    problems: " + ", ".join(f"{k}: {len(v)}" for k, v in result.problems.items()))
    for landed in killed.kills:
        record(f"    kill: {landed}")
    keys = sorted(set(killed.writes) | set(baseline.writes))
    extra = {k: killed.writes.get(k, 0) - baseline.writes.get(k, 0) for k in keys}
    record(f"  extra writes caused by {len(killed.kills)} kills: "
           f"{sum(killed.writes.values()) - sum(baseline.writes.values())} "
           f"({', '.join(f'{k}: {v:+d}' for k, v in extra.items() if v)})")
    assert len(killed.kills) == kills
    for label, result in (("with kills", killed), ("without kills", baseline)):
        bad = {k: v for k, v in result.problems.items() if v}
        assert not bad, f"{label}: {bad} (FAULT_SEED reproduces the run; jobs: " + "; ".join(
            p.describe() for p in plans) + ")"


@pytest.mark.timeout(900)
def test_reconciler_killed_at_random_points_short(fault_cluster: LocalCluster, rng: random.Random,
                                                  tmp_path: Path) -> None:
    kill_suite(fault_cluster, rng, tmp_path, jobs=8, kills=3, max_workers=32, timeout=400)


@pytest.mark.faults
@pytest.mark.timeout(3600)
def test_reconciler_killed_at_random_points(fault_cluster: LocalCluster, rng: random.Random,
                                            tmp_path: Path) -> None:
    kill_suite(fault_cluster, rng, tmp_path, jobs=50, kills=12, max_workers=256, timeout=1500)
