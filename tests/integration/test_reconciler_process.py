"""The reconciler process itself: health and metrics endpoints, leader election on a real Lease."""

from __future__ import annotations

import asyncio
import urllib.request

import pytest

from reconciler.runtime.client import KubeClient
from reconciler.runtime.kubeconfig import load_configuration
from reconciler.runtime.leader import LeaderElector
from tests.harness import LocalCluster
from tests.integration.mpijobs import Jobs, mpijob
from tests.integration.operator_fixtures import ReconcilerControl


def http_get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        text: str = response.read().decode()
        return text


def test_health_and_upstream_metrics(cluster: LocalCluster, namespace: str, reconciler: ReconcilerControl) -> None:
    assert http_get(reconciler.process.health_port, "/healthz") == "ok"
    jobs = Jobs(cluster, namespace)
    jobs.create(mpijob("pi", 1))
    jobs.wait_condition("pi", "Succeeded", timeout=90)
    metrics = http_get(reconciler.process.monitoring_port, "/metrics")
    values = {line.split(" ")[0]: float(line.split(" ")[1]) for line in metrics.splitlines()
              if line.startswith("mpi_operator_") and not line.startswith("#")}
    assert values["mpi_operator_jobs_created_total"] >= 1
    assert values["mpi_operator_jobs_successful_total"] >= 1
    assert values["mpi_operator_is_leader"] == 1
    assert values[f'mpi_operator_job_info{{launcher="pi-launcher",namespace="{namespace}"}}'] == 1


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
