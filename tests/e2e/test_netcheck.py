"""examples/netcheck on the real node with each MPI: rank 0 and a rank on the other worker exchange
point-to-point messages (latency, bandwidth), all ranks run an allreduce whose sum is checked, and every
rank ran on a worker. The figures are printed; they measure pod-to-pod traffic over the node's bridge."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from hack.devcluster.mpijobs import CPU_LIMIT, JSON
from hack.devcluster.realnode import RealNodeCluster
from tests.e2e.jobs import assert_ranks_on, run_to_success

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "netcheck" / "netcheck.yaml"
IMPLEMENTATION = {"openmpi": "OpenMPI", "openmpi4": "OpenMPI", "mpich": "MPICH", "intel": "Intel"}
LATENCY = re.compile(r"latency (\S+) <-> (\S+): ([\d.]+) us")
BANDWIDTH = re.compile(r"bandwidth \S+ <-> \S+: ([\d.]+) MB/s")
ALLREDUCE = re.compile(r"allreduce of 1048576 doubles over 2 ranks: ([\d.]+) ms, sum ok")


def netcheck_job(mpi: str) -> JSON:
    """The example as a user applies it, on our image for `mpi` (which holds /home/mpiuser/netcheck), with
    the CPU limits the node fits."""
    job: JSON = yaml.safe_load(EXAMPLE.read_text())
    job["spec"]["mpiImplementation"] = IMPLEMENTATION[mpi]
    for replica in job["spec"]["mpiReplicaSpecs"].values():
        for container in replica["template"]["spec"]["containers"]:
            container["image"] = f"mpioperator/mpi-pi:{mpi}"
            container["imagePullPolicy"] = "IfNotPresent"
            container["resources"]["limits"]["cpu"] = CPU_LIMIT
    return job


@pytest.mark.parametrize("mpi", list(IMPLEMENTATION))
def test_netcheck_exchanges_between_workers(real_cluster: RealNodeCluster, namespace: str, mpi: str) -> None:
    log, _ = run_to_success(real_cluster, namespace, netcheck_job(mpi))
    assert_ranks_on(log, ["netcheck-worker-0", "netcheck-worker-1"])
    latency, bandwidth, allreduce = LATENCY.search(log), BANDWIDTH.search(log), ALLREDUCE.search(log)
    assert latency, log
    assert bandwidth, log
    assert allreduce, log
    assert {latency.group(1).split(".")[0], latency.group(2).split(".")[0]} == {
        "netcheck-worker-0", "netcheck-worker-1"}, log
    assert "netcheck: OK" in log.splitlines(), log
    print(f"\nnetcheck {mpi}: latency {latency.group(3)} us, bandwidth {bandwidth.group(1)} MB/s, "
          f"allreduce 8 MiB {allreduce.group(1)} ms", file=sys.stderr)
