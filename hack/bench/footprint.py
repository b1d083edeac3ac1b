"""B6 + B7 (part): start-up time and memory of the webhook and the reconciler.

On a local control plane seeded with unrelated objects (5,000 scheduling-gated Pods without our labels,
1,000 ConfigMaps and 1,000 Secrets), starts ``python -m webhook`` and ``python -m reconciler`` and reports:
time from exec to the webhook's first 200 on /readyz and to the reconciler's caches synced; the RSS of both
60 s after start (B6a: unrelated objects must not be cached); then, with 100 MPIJobs of 16 workers each
running, the reconciler's RSS again and its growth per managed pod (B6b), at once and once the burst has
settled: its sockets back to the idle count (aiohttp closes idle connections 15-30 s after their last use),
waited for up to ``--settle-seconds``; then the same for 100 more such jobs, whose growth is the marginal
cost of a pod without the first burst's one-off costs. The reconciler runs with the shipped Deployment's args
(leader election on, the default client limits). ``--no-seed`` starts without the unrelated objects (for the
difference they make).
Usage: ``python -m hack.bench.footprint [--idle-seconds 60] [--settle-seconds 90] [--no-seed]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from hack.bench.apiload import ApiLoad
from hack.bench.procstat import ProcessSample, open_sockets
from hack.devcluster import LocalCluster, NodePool
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.operators import REPO_ROOT, OperatorReconciler, OperatorWebhook
from hack.devcluster.wait import wait_for

CRD = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
HANG = {"test.mpijob/outcome": "hang"}
LOCK_NAMESPACE = "mpi-operator"  # the shipped args' --lock-namespace
JOBS, WORKERS = 100, 16
PODS = JOBS * (WORKERS + 1)  # the launchers' pods are managed too


async def seed(load: ApiLoad) -> None:
    await load.request("POST", "/api/v1/namespaces", {"metadata": {"name": "unrelated"}})
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": {"schedulingGates": [{"name": "bench/hold"}],
                                                       "containers": [{"name": "c", "image": "nginx"}]}}
    await load.closed_loop("/api/v1/namespaces/unrelated/pods",
                           lambda i: {**pod, "metadata": {"name": f"p-{i}", "labels": {"app": "web"}}}, 5000, 32)
    data = {"config.yaml": "x" * 1000}
    await load.closed_loop("/api/v1/namespaces/unrelated/configmaps",
                           lambda i: {"metadata": {"name": f"c-{i}", "labels": {"app": "web"}}, "data": data}, 1000, 32)
    await load.closed_loop("/api/v1/namespaces/unrelated/secrets",
                           lambda i: {"metadata": {"name": f"s-{i}"}, "stringData": data}, 1000, 32)


async def run_jobs(load: ApiLoad, count: int, workers: int, namespace: str = "jobs") -> None:
    await load.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})

    def job(index: int) -> dict[str, Any]:
        return mpijob(f"job-{index}", workers, launcher_labels=HANG)

    await load.closed_loop(f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs", job, count, 4)


def load_jobs(cluster: LocalCluster, namespace: str) -> None:
    """100 MPIJobs of 16 workers (their launchers hang) in ``namespace``, until all 1,600 workers exist."""

    async def loaded() -> None:
        async with ApiLoad(cluster.server, cluster.ca_file, cluster.admin_cert, cluster.admin_key) as load:
            await run_jobs(load, JOBS, WORKERS, namespace)

    asyncio.run(loaded())
    pods = f"/api/v1/namespaces/{namespace}/pods?labelSelector=training.kubeflow.org/job-role=worker"
    wait_for(lambda: len(cluster.rest.get(pods)["items"]) == JOBS * WORKERS, timeout=300, interval=1.0,
             what=f"{JOBS * WORKERS:,} worker pods in {namespace}")


def settled(pid: int, idle_sockets: int, timeout: float) -> tuple[ProcessSample, float]:
    """The sample once the process holds no more sockets than at idle (the burst's connections closed), and
    the seconds that took."""
    began = time.monotonic()
    wait_for(lambda: open_sockets(pid) <= idle_sockets, timeout=timeout, interval=1.0,
             what=f"the reconciler's sockets back to {idle_sockets}")
    return ProcessSample.of(pid), time.monotonic() - began


def per_pod(before: ProcessSample, after: ProcessSample, pods: int = PODS) -> str:
    return f"+{(after.rss_kb - before.rss_kb) / pods:.2f} KiB per managed pod"


def mib(kb: int) -> str:
    return f"{kb / 1024:.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--settle-seconds", type=float, default=90.0,
                        help="longest wait for the burst's connections to close")
    parser.add_argument("--no-seed", dest="seed", action="store_false", help="no unrelated objects")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-footprint-") as tmp, \
            LocalCluster(nodes=NodePool(count=4, pods="1000"), crds=[CRD], verbose=False) as cluster:

        async def seeded() -> None:
            async with ApiLoad(cluster.server, cluster.ca_file, cluster.admin_cert, cluster.admin_key) as load:
                await seed(load)

        if args.seed:
            asyncio.run(seeded())
        cluster.kubectl("create", "namespace", LOCK_NAMESPACE, check=True)
        webhook = OperatorWebhook(cluster, Path(tmp))
        reconciler = OperatorReconciler(cluster, Path(tmp), as_shipped=True)
        try:
            began = time.monotonic()
            webhook.start()
            webhook.wait_ready()
            print(f"B7 webhook: first 200 on /readyz {time.monotonic() - began:.2f} s after exec")
            began = time.monotonic()
            reconciler.start()
            reconciler.wait_ready()
            unrelated = ("5,000 unrelated pods and 2,000 unrelated ConfigMaps/Secrets" if args.seed
                         else "nothing else")
            print(f"B7 reconciler: caches synced {time.monotonic() - began:.2f} s after exec "
                  f"({unrelated} in the cluster)")
            time.sleep(args.idle_seconds)  # a benchmark's idle period, not a test wait
            assert webhook.process is not None
            assert reconciler.process is not None
            web_idle = ProcessSample.of(webhook.process.pid)
            rec_idle = ProcessSample.of(reconciler.process.pid)
            idle_sockets = open_sockets(reconciler.process.pid)
            print(f"B6a idle RSS {args.idle_seconds:.0f} s after start: webhook {mib(web_idle.rss_kb)}, "
                  f"reconciler {mib(rec_idle.rss_kb)}")

            load_jobs(cluster, "jobs")
            rec_loaded = ProcessSample.of(reconciler.process.pid)
            print(f"B6b reconciler RSS with {JOBS} MPIJobs x {WORKERS} workers: {mib(rec_loaded.rss_kb)} "
                  f"({per_pod(rec_idle, rec_loaded)}, {PODS:,} pods), CPU {rec_loaded.cpu_seconds:.1f} s")
            rec_settled, waited = settled(reconciler.process.pid, idle_sockets, args.settle_seconds)
            print(f"B6b reconciler RSS settled {waited:.0f} s later: {mib(rec_settled.rss_kb)} "
                  f"({per_pod(rec_idle, rec_settled)}), peak {mib(rec_settled.peak_rss_kb)}")
            load_jobs(cluster, "jobs2")
            rec_loaded2 = ProcessSample.of(reconciler.process.pid)
            rec_settled2, waited = settled(reconciler.process.pid, idle_sockets, args.settle_seconds)
            print(f"B6b marginal, {PODS:,} more pods: {mib(rec_loaded2.rss_kb)} ({per_pod(rec_loaded, rec_loaded2)} "
                  f"from the first batch's loaded RSS), {mib(rec_settled2.rss_kb)} settled {waited:.0f} s later "
                  f"({per_pod(rec_settled, rec_settled2)} from the first batch's settled RSS)")
            print(f"B6b both batches, {2 * PODS:,} pods, from idle: {per_pod(rec_idle, rec_loaded2, 2 * PODS)} "
                  f"when the last worker exists, {per_pod(rec_idle, rec_settled2, 2 * PODS)} settled")
        finally:
            reconciler.stop()
            webhook.stop()


if __name__ == "__main__":
    main()
