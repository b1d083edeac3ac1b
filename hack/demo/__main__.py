"""``make demo``: the operator end to end on a local cluster, then a clean stop.

Where a real node can run (Linux, root), hack/demo/real.py computes pi with real MPI for the OpenMPI,
Intel MPI and MPICH examples, our operator deployed from its images. Elsewhere it falls back to a
control plane with kwok (fake nodes, no MPI): etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, our webhook (registered as we ship it) and our reconciler; it shows an invalid MPIJob
rejected at apply time, runs the three examples to Succeeded while printing their status transitions,
prints their hostfiles, and stops everything it started.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from hack.demo import real
from hack.demo.common import CRD, EXAMPLES, JOBS, NAMESPACE, say, show_rejection
from hack.devcluster import LocalCluster
from hack.devcluster.operators import OperatorReconciler, OperatorWebhook
from hack.devcluster.wait import wait_for


def follow(cluster: LocalCluster, names: tuple[str, ...], timeout: float = 180) -> None:
    """Print each job's condition transitions until all have finished."""
    seen: dict[str, set[tuple[str, str, str]]] = {name: set() for name in names}
    finished: set[str] = set()
    began = time.monotonic()

    def progress() -> bool:
        for name in names:
            job = cluster.rest.get(f"/apis/kubeflow.org/v2beta1/namespaces/{NAMESPACE}/mpijobs/{name}")
            for cond in (job.get("status") or {}).get("conditions") or []:
                key = (cond["type"], cond["status"], cond.get("reason", ""))
                if key not in seen[name]:
                    seen[name].add(key)
                    print(f"  {time.monotonic() - began:6.2f}s  {name:11} {cond['type']}={cond['status']:5} "
                          f"{cond.get('reason', '')}: {cond.get('message', '')}", flush=True)
                if cond["type"] in ("Succeeded", "Failed") and cond["status"] == "True":
                    finished.add(name)
        return len(finished) == len(names)

    wait_for(progress, timeout=timeout, interval=0.2, what="the examples to finish")


def show_results(cluster: LocalCluster) -> None:
    for name in JOBS:
        config: dict[str, Any] = cluster.rest.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/{name}-config")
        say(f"{name}: /etc/mpi/hostfile")
        print(config["data"]["hostfile"], end="")
    say("kubectl get mpij")
    print(cluster.kubectl("get", "mpij", "-n", NAMESPACE, "-o", "wide").stdout, end="")
    say(f"kubectl get mpijob {JOBS[0]} -o yaml (status)")
    job = yaml.safe_load(cluster.kubectl("get", "mpijob", JOBS[0], "-n", NAMESPACE, "-o", "yaml").stdout)
    print(yaml.safe_dump({"status": job["status"]}, sort_keys=False), end="")


def main() -> int:
    if real.run():  # real MPI on a real node when the machine allows it; says why not otherwise
        say("done: every process stopped, temporary files removed")
        return 0
    say("starting the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)")
    with tempfile.TemporaryDirectory(prefix="mpijob-demo-") as tmp, LocalCluster(nodes=3, crds=[CRD]) as cluster:
        webhook = OperatorWebhook(cluster, Path(tmp))
        reconciler = OperatorReconciler(cluster, Path(tmp))
        try:
            say("starting the webhook and registering it with the API server")
            webhook.start()
            webhook.wait_ready()
            webhook.register()
            say("starting the reconciler")
            reconciler.start()
            reconciler.wait_ready()
            cluster.kubectl("create", "namespace", NAMESPACE, check=True)
            show_rejection(cluster)
            say("kubectl apply -f examples/pi-openmpi.yaml -f examples/pi-intel.yaml -f examples/pi-mpich.yaml")
            applied = cluster.kubectl("apply", "-n", NAMESPACE, *(f"-f={EXAMPLES / f'{n}.yaml'}" for n in JOBS))
            print(applied.stdout.strip() or applied.stderr.strip())
            follow(cluster, JOBS)
            show_results(cluster)
        finally:
            say("stopping the reconciler, the webhook and the control plane")
            reconciler.stop()
            webhook.stop()
    say("done: every process stopped, temporary files removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
