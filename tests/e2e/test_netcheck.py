"""examples/netcheck on the real node with each MPI: rank 0 and a rank on the other worker exchange
point-to-point messages (latency, bandwidth), all ranks run an allreduce whose sum is checked, and every
rank ran on a worker. The figures are printed; they measure pod-to-pod traffic over the node's bridge."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from hack.devcluster.mpijobs import JSON
from hack.devcluster.realnode import RealNodeCluster
from tests.e2e.jobs import assert_ranks_on, run_to_success

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "netcheck" / "netcheck.yaml"
IMPLEMENTATION = {"openmpi": "OpenMPI", "openmpi4": "OpenMPI", "mpich": "MPICH", "intel": "Intel"}
LATENCY = re.compile(r"latency (\S+) <-> (\S+): ([\d.]+) us")
BANDWIDTH = re.compile(r"bandwidth \S+ <-> \S+: ([\d.]+) MB/s")
# MPI busy-polls: a rank held to half a CPU is throttled in the middle of a ping-pong, which measures the CFS
# quota instead of the network (4-9 ms latency at 500m). The node's 2 CPUs, less the operator's 200m, fit two
# workers of 800m.
CPU = {"Launcher": "100m", "Worker": "800m"}
# Open MPI binds each pod's rank to core 0 of the node (each pod's daemon counts cores from 0), so the two
# workers' ranks, on one node here, share a core: 3.4-4.1 ms latency bound, 6-8 us with --bind-to none.
UNBOUND = {"openmpi": ["--bind-to", "none"], "openmpi4": ["--bind-to", "none"]}
ALLREDUCE = re.compile(r"allreduce of 1048576 doubles over 2 ranks: ([\d.]+) ms, sum ok")


def netcheck_job(mpi: str) -> JSON:
    """The example as a user applies it, on our image for `mpi` (which holds /home/mpiuser/netcheck), with
    the CPU limits the node fits (CPU)."""
    job: JSON = yaml.safe_load(EXAMPLE.read_text())
    job["spec"]["mpiImplementation"] = IMPLEMENTATION[mpi]
    for role, replica in job["spec"]["mpiReplicaSpecs"].items():
        for container in replica["template"]["spec"]["containers"]:
            container["image"] = f"mpioperator/mpi-pi:{mpi}"
            container["imagePullPolicy"] = "IfNotPresent"
            container["resources"]["limits"]["cpu"] = CPU[role]
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    launcher["args"][1:1] = UNBOUND.get(mpi, [])
    return job


@pytest.mark.parametrize("mpi", list(IMPLEMENTATION))
def test_netcheck_exchanges_between_workers(real_cluster: RealNodeCluster, namespace: str, mpi: str) -> None:
    log, _ = run_to_success(real_cluster, namespace, netcheck_job(mpi))
    assert_netcheck(log, mpi)


def assert_netcheck(log: str, label: str) -> None:
    """Both ranks on the two workers, the latency measured between them, a bandwidth, the allreduce and the OK line;
    the figures printed under ``label``."""
    assert_ranks_on(log, ["netcheck-worker-0", "netcheck-worker-1"])
    latency, bandwidth, allreduce = LATENCY.search(log), BANDWIDTH.search(log), ALLREDUCE.search(log)
    assert latency, log
    assert bandwidth, log
    assert allreduce, log
    assert {latency.group(1).split(".")[0], latency.group(2).split(".")[0]} == {
        "netcheck-worker-0", "netcheck-worker-1"}, log
    assert "netcheck: OK" in log.splitlines(), log
    print(f"\nnetcheck {label}: latency {latency.group(3)} us, bandwidth {bandwidth.group(1)} MB/s, "
          f"allreduce 8 MiB {allreduce.group(1)} ms", file=sys.stderr)
