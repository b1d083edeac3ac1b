"""Upstream's pi examples on the real node, as non-root (as upstream ships them) and as root: the jobs
reach Succeeded and the launcher's log shows pi computed by one rank on each worker."""

from __future__ import annotations

import sys

import pytest

from hack.devcluster.mpijobs import conditions, get_job
from hack.devcluster.realnode import RealNodeCluster
from tests.e2e.jobs import assert_pi, run_to_success, upstream_pi

MPIS = ["openmpi", "mpich", "intel"]


@pytest.mark.parametrize("root", [False, True], ids=["non-root", "root"])
@pytest.mark.parametrize("mpi", MPIS)
def test_upstream_pi_succeeds(real_cluster: RealNodeCluster, namespace: str, mpi: str, root: bool) -> None:
    job = upstream_pi(mpi, "pi", root=root)
    log, took = run_to_success(real_cluster, namespace, job)
    print(f"\n{mpi} {'root' if root else 'non-root'}: apply to Succeeded in {took:.1f}s", file=sys.stderr)
    assert_pi(log, ["pi-worker-0", "pi-worker-1"])
    final = get_job(real_cluster, namespace, "pi")
    succeeded = conditions(final)["Succeeded"]
    assert succeeded["reason"] == "MPIJobSucceeded", succeeded
    assert final["status"]["replicaStatuses"]["Launcher"].get("succeeded") == 1, final["status"]
