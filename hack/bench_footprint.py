"""B6 + B7 (part): start-up time and memory of the webhook and the reconciler.

On a local control plane seeded with unrelated objects (5,000 scheduling-gated Pods without our labels,
1,000 ConfigMaps and 1,000 Secrets), starts ``python -m webhook`` and ``python -m reconciler`` and reports:
time from exec to the webhook's first 200 on /readyz and to the reconciler's caches synced; the RSS of both
60 s after start (B6a: unrelated objects must not be cached); then, with 100 MPIJobs of 16 workers each
running, the reconciler's RSS again and its growth per managed pod (B6b), at once and after ``--settle-seconds``
(the burst's extra connections closed, free heap pages returned). ``--no-seed`` starts without the unrelated
objects (for the difference they make).
Usage: ``python -m hack.bench_footprint [--idle-seconds 60] [--settle-seconds 30] [--no-seed]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from hack.apiload import ApiLoad
from hack.procstat import ProcessSample
from tests.harness import LocalCluster, NodePool
from tests.harness.wait import wait_for
from tests.integration.mpijobs import mpijob
from tests.operator_processes import REPO_ROOT, OperatorReconciler, OperatorWebhook

CRD = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
HANG = {"test.mpijob/outcome": "hang"}


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


async def run_jobs(load: ApiLoad, count: int, workers: int) -> None:
    await load.request("POST", "/api/v1/namespaces", {"metadata": {"name": "jobs"}})

    def job(index: int) -> dict[str, Any]:
        return mpijob(f"job-{index}", workers, launcher_labels=HANG)

    await load.closed_loop("/apis/kubeflow.org/v2beta1/namespaces/jobs/mpijobs", job, count, 4)


def mib(kb: int) -> str:
    return f"{kb / 1024:.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--settle-seconds", type=float, default=30.0)
    parser.add_argument("--no-seed", dest="seed", action="store_false", help="no unrelated objects")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-footprint-") as tmp, \
            LocalCluster(nodes=NodePool(count=4, pods="1000"), crds=[CRD], verbose=False) as cluster:

        async def seeded() -> None:
            async with ApiLoad(cluster.server, cluster.ca_file, cluster.admin_cert, cluster.admin_key) as load:
                await seed(load)

        if args.seed:
            asyncio.run(seeded())
        webhook = OperatorWebhook(cluster, Path(tmp))
        reconciler = OperatorReconciler(cluster, Path(tmp), "--kube-api-qps=200", "--kube-api-burst=400")
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
            print(f"B6a idle RSS {args.idle_seconds:.0f} s after start: webhook {mib(web_idle.rss_kb)}, "
                  f"reconciler {mib(rec_idle.rss_kb)}")

            async def loaded() -> None:
                async with ApiLoad(cluster.server, cluster.ca_file, cluster.admin_cert, cluster.admin_key) as load:
                    await run_jobs(load, 100, 16)

            asyncio.run(loaded())
            pods = "/api/v1/namespaces/jobs/pods?labelSelector=training.kubeflow.org/job-role=worker"
            wait_for(lambda: len(cluster.rest.get(pods)["items"]) == 1600, timeout=300, interval=1.0,
                     what="1,600 worker pods")
            rec_loaded = ProcessSample.of(reconciler.process.pid)
            per_pod = (rec_loaded.rss_kb - rec_idle.rss_kb) * 1024 / 1700
            print(f"B6b reconciler RSS with 100 MPIJobs x 16 workers: {mib(rec_loaded.rss_kb)} "
                  f"(+{per_pod / 1024:.2f} KiB per managed pod, 1,700 pods), CPU {rec_loaded.cpu_seconds:.1f} s")
            time.sleep(args.settle_seconds)  # a benchmark's settling period, not a test wait
            rec_settled = ProcessSample.of(reconciler.process.pid)
            per_pod = (rec_settled.rss_kb - rec_idle.rss_kb) * 1024 / 1700
            print(f"B6b reconciler RSS {args.settle_seconds:.0f} s later: {mib(rec_settled.rss_kb)} "
                  f"(+{per_pod / 1024:.2f} KiB per managed pod), peak {mib(rec_settled.peak_rss_kb)}")
        finally:
            reconciler.stop()
            webhook.stop()


if __name__ == "__main__":
    main()
