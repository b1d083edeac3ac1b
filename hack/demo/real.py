"""The real-node part of ``make demo``: the three pi examples computed by real MPI processes.

A control plane plus one real node (hack/devcluster/realnode.py) with our images, and our operator
deployed from its own images by `kubectl apply --server-side -k`; shows an invalid MPIJob rejected at
apply time, applies examples/pi-{openmpi,intel,mpich}.yaml (CPU limits lowered to fit the node's 2 CPUs),
prints each launcher's output, on which pod each rank ran, and ``kubectl get mpij``. Where a real node
cannot run (not Linux, not root), it says why and how to get it, and returns False: the demo then falls
back to kwok.
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from hack.demo.common import CRD, EXAMPLES, JOBS, NAMESPACE, say, show_rejection
from hack.devcluster.mpijobs import CPU_LIMIT, launcher_log, wait_finished
from hack.devcluster.operator_deploy import deploy, operator_image_archives
from hack.devcluster.realnode import RealNodeCluster, image_archives, unavailable

RANK_LINE = re.compile(r"Rank (\d+) on host (\S+)")


def fitted(name: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    for spec in job["spec"]["mpiReplicaSpecs"].values():
        for container in spec["template"]["spec"]["containers"]:
            container.setdefault("resources", {}).setdefault("limits", {})["cpu"] = CPU_LIMIT
    return job


def where_ranks_ran(log: str, job: str) -> str:
    """One line saying on which pod each rank ran, and how many ran on the launcher (none, as it should)."""
    hosts = [host.split(".")[0] for _, host in sorted(RANK_LINE.findall(log), key=lambda found: int(found[0]))]
    on_launcher = sum(host == f"{job}-launcher" for host in hosts)
    return f"ranks: {', '.join(f'{rank} on {host}' for rank, host in enumerate(hosts))}; on the launcher: {on_launcher}"


def run() -> bool:
    """Run the real-node part; False (after saying why) when this machine cannot."""
    reason = unavailable()
    if reason:
        say(f"skipping the real-node part: {reason}. Only kwok (simulated pods, no MPI) below. For real MPI, "
            "run `make demo` as root on a Linux machine: it installs containerd from the distribution's packages "
            "and builds the node and its images first")
        return False
    say("building/locating the real node's binaries and images (cached after the first run)")
    images = image_archives() + operator_image_archives()
    say("starting a local control plane plus a real node (kubelet, containerd, CoreDNS)")
    with tempfile.TemporaryDirectory(prefix="mpijob-demo-real-") as tmp, \
            RealNodeCluster(crds=[CRD], images=images) as cluster:
        say("kubectl apply --server-side -k (deploy/ with manual certificates, from python -m webhook.certs): "
            "the operator from its images")
        timings = deploy(cluster, Path(tmp))
        print(f"webhook called by the API server {timings['webhook-called']:.1f}s after apply, reconciler holding "
              f"its Lease after {timings['reconciler-leader']:.1f}s")
        print(cluster.kubectl("get", "pods", "-n", "mpi-operator", "-o", "wide").stdout, end="")
        cluster.kubectl("create", "namespace", NAMESPACE, check=True)
        show_rejection(cluster)
        for name in JOBS:
            say(f"kubectl apply -f examples/{name}.yaml (cpu limits {CPU_LIMIT}), on the real node")
            began = time.monotonic()
            cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=yaml.safe_dump(fitted(name)), check=True)
            outcome, _ = wait_finished(cluster, NAMESPACE, name)
            print(f"{name}: {outcome} {time.monotonic() - began:.1f}s after apply; the launcher's output:")
            log = launcher_log(cluster, NAMESPACE, name)
            print("    " + log.strip().replace("\n", "\n    "))
            print(where_ranks_ran(log, name), flush=True)
        say("kubectl get mpij -o wide")
        print(cluster.kubectl("get", "mpij", "-n", NAMESPACE, "-o", "wide").stdout, end="")
    say("real node stopped: containers, mounts, bridge and state removed")
    return True


if __name__ == "__main__":
    run()
    sys.exit(0)
