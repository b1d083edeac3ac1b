"""Upstream's pi examples on the real node, as non-root (as upstream ships them) and as root, with Open MPI 5
(upstream's image since v0.7.0), Open MPI 4, MPICH and Intel MPI: the jobs reach Succeeded and the launcher's
log shows pi computed by ranks that all ran on the workers, as the hostfile spreads them, none on the launcher.

On Open MPI 5 a job whose launcher only has upstream's ``OMPI_MCA_orte_*`` variables runs every rank on the
launcher and still prints pi and succeeds (kubeflow/trainer#4028): only the rank-to-host lines show it."""

from __future__ import annotations

import sys

import pytest

from hack.devcluster.mpijobs import conditions, get_job
from hack.devcluster.realnode import RealNodeCluster
from tests.e2e.jobs import assert_pi, run_to_success, upstream_pi

MPIS = ["openmpi", "openmpi4", "mpich", "intel"]


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


@pytest.mark.parametrize("mpi", MPIS)
def test_ranks_fill_each_workers_slots(real_cluster: RealNodeCluster, namespace: str, mpi: str) -> None:
    """slotsPerWorker 2 and `mpirun -n 4`: the hostfile gives each worker two slots, so each worker runs
    exactly two ranks and the launcher none."""
    job = upstream_pi(mpi, "slots")
    job["spec"]["slotsPerWorker"] = 2
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    argv = launcher.get("args") or []
    argv[argv.index("-n") + 1] = "4"
    log, _ = run_to_success(real_cluster, namespace, job)
    assert_pi(log, ["slots-worker-0", "slots-worker-0", "slots-worker-1", "slots-worker-1"])


def test_open_mpi_5_launch_tree_reaches_every_worker(real_cluster: RealNodeCluster, namespace: str) -> None:
    """PRRTE starts its daemons as a tree, 64 per level: with a radix of 1 the daemon on worker 0 starts
    worker 1's with the ssh args it was handed (PRRTE 3.0 cuts them at an "=", which the operator's
    value avoids), as it would in a job of more than 64 workers."""
    job = upstream_pi("openmpi", "tree")
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    launcher["env"] = [{"name": "PRTE_MCA_rml_base_radix", "value": "1"}]
    log, _ = run_to_success(real_cluster, namespace, job)
    assert_pi(log, ["tree-worker-0", "tree-worker-1"])
