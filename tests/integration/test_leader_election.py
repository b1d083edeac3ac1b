"""Leader election as users run it: the shipped Deployment's args (leader election on, our default of no
client-side limit, and upstream's 5 QPS / 10 burst), under the reconciler's own ServiceAccount.

Regression for the Lease starvation of issue 7: the Lease renewals waited in the same token bucket as
the worker creates, missed their 5 s deadline about 8 s into a 64-worker job, and the process exited.
These tests run such jobs to completion while sampling the Lease: one holder, no transition, renewals
never further apart than the lease duration, and the process never restarts.

Their real-clock waits follow from upstream's Lease timings, which the reconciler keeps and has no flags for
(15 s duration, 5 s renew deadline, 3 s between attempts: reconciler/runtime/leader.py): a successor takes a
SIGKILLed leader's Lease only once it has seen it unrenewed for 15 s, so each of the three kills costs that. The
rest is the jobs' own pace (512 workers created at upstream's 5 QPS take 100 s or more), which is the starvation
under test. Every wait is a condition with a deadline; none is shortened.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest

from hack.devcluster import LocalCluster, NodePool
from hack.devcluster.audit import WRITE_VERBS, audit_events, resource_of
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.nodes import build_node
from hack.devcluster.operators import OperatorReconciler
from hack.devcluster.rest import ApiError
from hack.devcluster.wait import wait_for
from reconciler.runtime.leader import JITTER, LEASE_DURATION, RETRY_PERIOD
from shared.jsondict import JSONDict
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl

LOCK_NAMESPACE = "mpi-operator"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{LOCK_NAMESPACE}/leases/mpi-operator"
# The takeover's worst case, as client-go's arithmetic (and ours) goes: a successor may first see the dead
# leader's last record one acquire interval (RETRY_PERIOD * JITTER at most) after the kill, acquires at its first
# attempt after seeing it unchanged for LEASE_DURATION, one more interval at most, and then writes the Lease.
TAKEOVER_BOUND = LEASE_DURATION + 2 * RETRY_PERIOD * JITTER + 2
UPSTREAM_LIMITS = ("--kube-api-qps=5", "--kube-api-burst=10")
IN_FLIGHT = timedelta(seconds=2)
EXTRA_NODES = NodePool(count=2, pods="400", name_prefix="kwok-lease-")


def _micro(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z")


class LeaseWatch:
    """Samples the Lease: holders seen, transitions, and the longest gap between renewals."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.holders: set[str] = set()
        self.transitions: set[int] = set()
        self.renewals: list[datetime] = []

    def sample(self) -> None:
        spec = self.cluster.rest.get(LEASE_PATH)["spec"]
        self.holders.add(spec["holderIdentity"])
        self.transitions.add(spec.get("leaseTransitions", 0))
        renewed = _micro(spec["renewTime"])
        if not self.renewals or renewed != self.renewals[-1]:
            self.renewals.append(renewed)

    @property
    def longest_gap(self) -> float:
        gaps = [(b - a).total_seconds() for a, b in zip(self.renewals, self.renewals[1:], strict=False)]
        return max(gaps, default=0.0)


@pytest.fixture
def more_nodes(cluster: LocalCluster) -> Iterator[None]:
    """Room for 800 more pods (the session's three nodes hold 110 each)."""
    for index in range(EXTRA_NODES.count):
        try:
            cluster.rest.create("/api/v1/nodes", build_node(EXTRA_NODES, index))
        except ApiError as error:
            if error.status != 409:
                raise
    try:
        yield
    finally:
        for name in EXTRA_NODES.names():
            cluster.rest.request("DELETE", f"/api/v1/nodes/{name}")


def shipped(cluster: LocalCluster, alone: ReconcilerControl, tmp_path: Path, *extra: str) -> OperatorReconciler:
    process = OperatorReconciler(cluster, tmp_path, *extra, name="shipped",
                                 kubeconfig=alone.refreshed_credentials().kubeconfig, as_shipped=True)
    process.start()
    return process


@pytest.mark.usefixtures("more_nodes")
@pytest.mark.parametrize("workers", [64, 512])
@pytest.mark.parametrize("limits", [pytest.param((), id="defaults"), pytest.param(UPSTREAM_LIMITS, id="upstream-5qps")])
def test_large_job_as_shipped_keeps_the_lease(cluster: LocalCluster, namespace: str, alone: ReconcilerControl,
                                              tmp_path: Path, workers: int, limits: tuple[str, ...]) -> None:
    process = shipped(cluster, alone, tmp_path, *limits)
    try:
        wait_for(lambda: process.check_alive() and process.log_count("became leader") == 1, timeout=60,
                 interval=0.2, what="the shipped reconciler to become leader")
        watch = LeaseWatch(cluster)
        jobs = Jobs(cluster, namespace)
        # cleanPodPolicy None: the workers' deletion is left to the namespace's, so the test times creation
        jobs.create(mpijob("big", workers, runPolicy={"cleanPodPolicy": "None"}))
        deadline = time.monotonic() + 60 + workers / 2.5  # 5 writes/s for the workers, with a 2x margin

        def succeeded() -> bool:
            process.check_alive()
            watch.sample()
            condition = jobs.condition("big", "Succeeded")
            return condition is not None and condition["status"] == "True"

        wait_for(succeeded, timeout=deadline - time.monotonic(), interval=1.0,
                 what=f"the {workers}-worker job to succeed at upstream's client limits")
        assert len(jobs.workers("big")) == workers
        assert process.alive()
        assert process.log_count("became leader") == 1
        assert process.log_count("leader election lost") == 0
        assert len(watch.holders) == 1
        assert len(watch.transitions) == 1
        assert watch.longest_gap < LEASE_DURATION, watch.renewals
    finally:
        process.stop()


def test_sigterm_releases_the_lease_and_a_successor_takes_over_at_once(cluster: LocalCluster,
                                                                       alone: ReconcilerControl,
                                                                       tmp_path: Path) -> None:
    first = shipped(cluster, alone, tmp_path)
    second: OperatorReconciler | None = None
    try:
        wait_for(lambda: first.check_alive() and first.log_count("became leader") == 1, timeout=60,
                 interval=0.2, what="the first reconciler to lead")
        second = OperatorReconciler(cluster, tmp_path, name="successor",
                                    kubeconfig=alone.refreshed_credentials().kubeconfig, as_shipped=True)
        second.start()
        wait_for(lambda: second is not None and second.check_alive()
                 and second.log_count("lease held by another") == 1, timeout=30, interval=0.2,
                 what="the successor to see the Lease held")
        stopped = time.monotonic()
        first.stop()
        assert first.log_count("lease released") == 1
        wait_for(lambda: second is not None and second.log_count("became leader") == 1, timeout=LEASE_DURATION,
                 interval=0.1, what="the successor to take the released Lease")
        # A released Lease is taken within the successor's retry period (3 s, jittered), not after expiry.
        assert time.monotonic() - stopped < 5.0
    finally:
        first.stop()
        if second is not None:
            second.stop()


def _log_time(line: str) -> datetime:
    stamp = line.split("ts=", 1)[1].split(" ", 1)[0]
    return datetime.strptime(stamp.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")


def _became_leader_at(process: OperatorReconciler) -> datetime | None:
    lines = [ln for ln in process.log.read_text(errors="replace").splitlines() if 'msg="became leader"' in ln]
    return _log_time(lines[0]) if lines else None


def _became_leader(process: OperatorReconciler) -> datetime:
    led = _became_leader_at(process)
    assert led is not None
    return led


def _has_workers(jobs: Jobs, job: str, count: int) -> bool:
    return len(jobs.workers(job)) >= count


def _audit_time(event: JSONDict) -> datetime:
    return datetime.strptime(event["requestReceivedTimestamp"].replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")


@pytest.mark.usefixtures("more_nodes")
def test_leader_killed_mid_job_successor_takes_over_and_only_the_holder_writes(
        cluster: LocalCluster, namespace: str, alone: ReconcilerControl, tmp_path: Path) -> None:
    """Two replicas as shipped; the leader is SIGKILLed at random points of a 256-worker job three times
    (a fresh replica joins after each kill). Checked with the audit log: every worker created exactly
    once, and every write of a replica made while it held the Lease."""
    assert cluster.audit_log is not None
    seed = int(time.time())
    rng = random.Random(seed)
    print(f"seed={seed}")
    offset = cluster.audit_log.stat().st_size if cluster.audit_log.exists() else 0
    replicas = [shipped(cluster, alone, tmp_path / f"r{i}") for i in range(2)]
    leaders: list[tuple[OperatorReconciler, datetime, datetime | None]] = []  # process, led from, killed at
    jobs = Jobs(cluster, namespace)
    try:
        def leader() -> OperatorReconciler | None:
            live = [p for p in replicas if p.alive() and _became_leader_at(p) is not None]
            return live[0] if len(live) == 1 else None

        current = until(leader, timeout=60, interval=0.2, what="one replica to lead")
        jobs.create(mpijob("failover", 256, runPolicy={"cleanPodPolicy": "None"}))
        for kill, target in enumerate(sorted(rng.sample(range(5, 250), 3))):
            wait_for(partial(_has_workers, jobs, "failover", target), timeout=120, interval=0.1,
                     what=f"{target} workers before kill {kill + 1}")
            led_from = _became_leader_at(current)
            assert led_from is not None
            current.kill()
            killed_at = datetime.now(UTC)  # the process is gone (reaped)
            leaders.append((current, led_from, killed_at))
            replicas.append(shipped(cluster, alone, tmp_path / f"r{kill + 2}"))
            current = until(leader, timeout=TAKEOVER_BOUND + 10, interval=0.1,
                               what=f"a successor to lead after kill {kill + 1}")
            took = (_became_leader(current) - killed_at).total_seconds()
            assert took <= TAKEOVER_BOUND, f"takeover took {took:.1f} s"
        jobs.wait_condition("failover", "Succeeded", timeout=240)
        leaders.append((current, _became_leader(current), None))
        workers = jobs.workers("failover")
        assert len(workers) == 256
    finally:
        for process in replicas:
            process.stop()
    windows = {process.process.pid: (led, killed) for process, led, killed in leaders if process.process}
    attempts, stored, deletes = _pod_writes_by_holders(cluster.audit_log, offset, namespace, windows)
    # cleanPodPolicy None: no worker is ever deleted, so a name stored twice would mean a delete and a
    # re-create. A create in flight when its process was killed is logged as 504 (context canceled) yet may
    # have been stored, so every final worker has at least one create attempt and at most one 201.
    assert deletes == 0
    assert max(stored.values()) == 1
    assert set(attempts) == {str(p["metadata"]["name"]) for p in workers}


Window = tuple[datetime, datetime | None]  # led from, killed at (None: still leading)


def _pod_writes_by_holders(log: Path, offset: int, namespace: str,
                           windows: dict[int, Window]) -> tuple[dict[str, int], dict[str, int], int]:
    """Check that every write of a replica (by the pid in its User-Agent) fell in its leadership window;
    return the create attempts and successful creates per pod name of ``namespace``, and its pod deletes."""
    attempts: dict[str, int] = {}
    stored: dict[str, int] = {}
    deletes = 0
    for event in audit_events(log, offset=offset):
        agent = str(event.get("userAgent", ""))
        ref = event.get("objectRef") or {}
        if not agent.startswith("mpi-operator/") or event["verb"] not in WRITE_VERBS or ref.get("resource") == "leases":
            continue
        pid = int(agent.rsplit("pid/", 1)[1])
        assert pid in windows, f"a replica that never led wrote: {event['verb']} {resource_of(event)}"
        led, killed = windows[pid]
        received = _audit_time(event)
        assert received >= led, ("written before leading", event["verb"], resource_of(event))
        # Requests a process sent just before its death may reach the API server's handler a little later.
        assert killed is None or received <= killed + IN_FLIGHT, ("written after the kill", event["verb"],
                                                                  resource_of(event))
        if ref.get("namespace") == namespace and ref.get("resource") == "pods" and event["verb"] == "delete":
            deletes += 1
        code = (event.get("responseStatus") or {}).get("code")
        if ref.get("namespace") == namespace and event["verb"] == "create" and ref.get("resource") == "pods":
            name = str(ref.get("name") or "")
            attempts[name] = attempts.get(name, 0) + 1
            stored[name] = stored.get(name, 0) + (code == 201)
    return attempts, stored, deletes
