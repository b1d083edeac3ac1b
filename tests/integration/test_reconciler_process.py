"""The reconciler process itself: health and metrics endpoints, leader election on a real Lease."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.operators import OperatorReconciler
from hack.devcluster.wait import wait_for
from reconciler.runtime.client import KubeClient
from reconciler.runtime.kubeconfig import load_configuration
from reconciler.runtime.leader import LeaderElector
from tests.integration.mpijobs import Jobs
from tests.integration.operator_fixtures import ReconcilerControl


def http_get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        text: str = response.read().decode()
        return text


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
# ours beside upstream's: timings and retries depend on the machine, their series and counts do not
TIMED = ("mpi_operator_job_start_latency_seconds", "mpi_operator_job_duration_seconds",
         "mpi_operator_workqueue_queue_duration_seconds", "mpi_operator_launcher_gated_seconds",
         "mpi_operator_reconcile_errors",
         "mpi_operator_workqueue_retries", "mpi_operator_workqueue_depth")


def all_metrics(port: int) -> Samples:
    """Every ``mpi_operator_*`` sample the reconciler serves: (name, sorted labels) -> value."""
    families = text_string_to_metric_families(http_get(port, "/metrics"))
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in families if family.name.startswith("mpi_operator_") for sample in family.samples}


def job_metrics(port: int) -> Samples:
    """The samples whose values do not depend on timing (upstream's, and jobs pending and running)."""
    return {key: value for key, value in all_metrics(port).items() if not key[0].startswith(TIMED)}


def timed_counts(samples: Samples) -> Samples:
    """The timed series' counts (histograms by their _count and +Inf bucket), the rest by name."""
    return {key: value for key, value in samples.items()
            if key[0].startswith(TIMED[:2]) and (key[0].endswith("_count") or ("le", "+Inf") in key[1])}


def timed_names(samples: Samples) -> set[str]:
    return {name for name, _ in samples if name.startswith(TIMED)}


def test_health_and_upstream_metrics(cluster: LocalCluster, namespace: str, alone: ReconcilerControl,
                                     tmp_path: Path) -> None:
    """Exact counts across one job, from a reconciler of the test's own (watching only its namespace, the
    session's stopped), so that a job counted twice, or another test's job, shows."""
    own = OperatorReconciler(cluster, tmp_path, f"--namespace={namespace}", name="metrics",
                             kubeconfig=alone.refreshed_credentials().kubeconfig)
    own.start()
    try:
        own.wait_ready()
        assert http_get(own.health_port, "/healthz") == "ok"
        counters: Samples = {(f"mpi_operator_jobs_{kind}_total", ()): 0.0
                    for kind in ("created", "successful", "failed", "restarted")}
        gauges: Samples = {(f"mpi_operator_{name}", ()): 0.0
                  for name in ("jobs_pending", "jobs_running", "jobs_pending_oldest_age_seconds")}
        assert job_metrics(own.monitoring_port) == {**counters, **gauges, ("mpi_operator_is_leader", ()): 1.0}
        names = {f"{family}_{part}" for family in TIMED[:4] for part in ("bucket", "sum", "count")}
        names |= {"mpi_operator_reconcile_errors_total", "mpi_operator_workqueue_retries_total",
                  "mpi_operator_workqueue_depth"}
        assert timed_names(all_metrics(own.monitoring_port)) == names, "no _created series"
        jobs = Jobs(cluster, namespace)
        jobs.create(mpijob("pi", 1))
        jobs.wait_condition("pi", "Succeeded", timeout=90)
        # later syncs of the finished job must count nothing more: one more sync, seen in the log, then read
        finished = f" msg=sync key={namespace}/pi outcome=finished "
        seen = own.log_count(finished)
        jobs.patch("pi", {"metadata": {"annotations": {"test.mpijob/touched": "yes"}}})
        wait_for(lambda: own.log_count(finished) > seen, timeout=30, what="a sync of the finished job")
        assert job_metrics(own.monitoring_port) == {
            ("mpi_operator_jobs_created_total", ()): 1.0, ("mpi_operator_jobs_successful_total", ()): 1.0,
            ("mpi_operator_jobs_failed_total", ()): 0.0, ("mpi_operator_jobs_restarted_total", ()): 0.0,
            ("mpi_operator_is_leader", ()): 1.0, **gauges,
            ("mpi_operator_job_info", (("launcher", "pi-launcher"), ("namespace", namespace))): 1.0}
        samples = all_metrics(own.monitoring_port)
        assert timed_names(samples) == names
        assert samples[("mpi_operator_launcher_gated_seconds_count", ())] == 0.0  # an AtStartup job is never gated
        counts = timed_counts(samples)
        start, duration = TIMED[:2]
        # Running may be missed when the launcher ends between two syncs: that stage's count is 0 or 1
        running = counts.pop((f"{start}_count", (("stage", "launcher_running"),)))
        assert counts.pop((f"{start}_bucket", (("le", "+Inf"), ("stage", "launcher_running")))) == running
        assert running in {0.0, 1.0}
        assert counts == {
            (f"{start}_count", (("stage", "workers_ready"),)): 1.0,
            (f"{start}_bucket", (("le", "+Inf"), ("stage", "workers_ready"))): 1.0,
            (f"{duration}_count", (("outcome", "succeeded"),)): 1.0,
            (f"{duration}_bucket", (("le", "+Inf"), ("outcome", "succeeded"))): 1.0,
            (f"{duration}_count", (("outcome", "failed"),)): 0.0,
            (f"{duration}_bucket", (("le", "+Inf"), ("outcome", "failed"))): 0.0}
    finally:
        own.stop()


async def test_one_leader_at_a_time_and_failover(cluster: LocalCluster, namespace: str) -> None:
    configuration = await load_configuration(str(cluster.kubeconfig))
    clients = [KubeClient(configuration, 100, 100) for _ in range(2)]
    first, second = (LeaderElector(client, namespace, lease_duration=5, renew_deadline=3, retry_period=0.2)
                     for client in clients)
    try:
        await asyncio.wait_for(first.acquire(), 10)
        renewing = asyncio.create_task(first.keep())
        with pytest.raises(TimeoutError):  # a held, renewed lease is never taken over
            await asyncio.wait_for(second.acquire(), 3)
        renewing.cancel()  # the leader stops renewing, as a crashed process would
        await asyncio.wait_for(second.acquire(), 20)
        path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/mpi-operator"
        lease = await clients[1].request("GET", path)
        assert lease["spec"]["holderIdentity"] == second.identity
        assert lease["spec"]["leaseTransitions"] == 1
        assert await first.try_acquire_or_renew() is False
    finally:
        for client in clients:
            await client.close()
