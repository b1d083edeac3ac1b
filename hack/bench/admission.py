"""B0 + B1: MPIJob CREATE latency through a real API server, without and with our webhooks.

Starts the local control plane and ``python -m webhook``; then, interleaved over several rounds,
creates MPIJobs (about 20 KB each) in a closed loop with 1 and 16 clients, once with no webhook
registered and once with our mutating + validating webhooks registered as we ship them (URL
clientConfig, ``failurePolicy`` Ignore/Fail, ``timeoutSeconds`` 2 as in B1). Prints p50/p99 for each,
the added latency and the ratio, and the API server's own webhook latency histogram.
Usage: ``python -m hack.bench.admission [--count 300] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import tempfile
from pathlib import Path
from typing import Any

from hack.bench.apiload import ApiLoad, Latencies
from hack.bench.payloads import mpijob_of_size
from hack.devcluster import LocalCluster
from hack.devcluster.operators import REPO_ROOT, OperatorWebhook

CRD = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
CLIENTS = (1, 16)


async def one_phase(load: ApiLoad, namespace: str, body: dict[str, Any], count: int, clients: int,
                    tag: str) -> Latencies:
    await load.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    path = f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs"

    def make(index: int) -> dict[str, Any]:
        return {**body, "metadata": {**body["metadata"], "name": f"{tag}-{index}", "namespace": namespace}}

    await load.closed_loop(path, make, min(50, count), clients)  # warm-up (connections, caches)
    await load.request("DELETE", f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs")
    result = await load.closed_loop(path, lambda i: make(i + 100000), count, clients)
    await load.request("DELETE", f"/api/v1/namespaces/{namespace}")
    return result


def median_of(runs: list[Latencies], attr: str) -> float:
    return float(statistics.median(getattr(run, attr) for run in runs))


async def bench(cluster: LocalCluster, webhook: OperatorWebhook, args: argparse.Namespace) -> None:
    body = mpijob_of_size("bench", 20_000, workers=64)
    results: dict[tuple[str, int], list[Latencies]] = {}
    async with ApiLoad(cluster.server, cluster.ca_file, cluster.admin_cert, cluster.admin_key) as load:
        for round_index in range(args.rounds):
            for mode in ("none", "ours"):
                if mode == "ours":
                    webhook.register(timeout_seconds=2)
                else:
                    webhook.unregister()
                for clients in CLIENTS:
                    name = f"b1-{mode}-c{clients}-r{round_index}"
                    run = await one_phase(load, name, body, args.count, clients, "j")
                    results.setdefault((mode, clients), []).append(run)
                    print(f"round {round_index} {mode:4} c={clients:<2} {run.summary()}")
        metrics = await load.session.get(cluster.server + "/metrics")  # type: ignore[union-attr]
        text = await metrics.text()
    report(results, args, [line for line in text.splitlines()
                           if line.startswith("apiserver_admission_webhook_admission_duration_seconds_")
                           and "mpijob" in line and ("_sum" in line or "_count" in line)])


def report(results: dict[tuple[str, int], list[Latencies]], args: argparse.Namespace, webhook_lines: list[str]) -> None:
    print(f"\n# B0/B1 MPIJob CREATE through kube-apiserver v1.36.3 (20 KB body), {platform.node()}, "
          f"{args.count} creates per run, median of {args.rounds} interleaved rounds")
    print("| clients | no webhook p50 / p99 (ms) | our webhooks p50 / p99 (ms) | added p50 / p99 (ms) | p99 ratio |")
    print("|---|---|---|---|---|")
    for clients in CLIENTS:
        none, ours = results[("none", clients)], results[("ours", clients)]
        b50, b99 = median_of(none, "p50"), median_of(none, "p99")
        o50, o99 = median_of(ours, "p50"), median_of(ours, "p99")
        print(f"| {clients} | {b50:.2f} / {b99:.2f} | {o50:.2f} / {o99:.2f} | {o50 - b50:+.2f} / {o99 - b99:+.2f} | "
              f"{o99 / b99:.2f} |")
    errors = sum(run.errors for runs in results.values() for run in runs)
    print(f"errors (rejections, timeouts): {errors}")
    for line in webhook_lines:
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=300, help="creates per measured run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians are reported)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-admission-") as tmp, \
            LocalCluster(nodes=1, crds=[CRD], verbose=False) as cluster:
        webhook = OperatorWebhook(cluster, Path(tmp))
        webhook.start()
        try:
            webhook.wait_ready()
            asyncio.run(bench(cluster, webhook, args))
        finally:
            webhook.unregister()
            webhook.stop()


if __name__ == "__main__":
    main()
