"""``render --explain-topology``: Kueue's ranks of each pod, the MPI ranks it runs and, with a Workload, its domain
(reconciler/explain_topology.py). tests/integration/test_kueue_topology.py checks the same view against where the
real Kueue put the pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler import render
from reconciler.explain_topology import PodRank, expand_assignment, explain
from shared.api import kueue_topology as kt
from tests.unit.reconciler.helpers import make_job, replica

HOST = "kubernetes.io/hostname"


def job(workers: int, *, launcher: dict[str, str] | None = None, worker: dict[str, str] | None = None,
        launcher_as_worker: bool = False, slots: int = 1) -> Any:
    def spec(annotations: dict[str, str] | None, count: int | None = None) -> dict[str, Any]:
        out = replica(replicas=count)
        if annotations:
            out["template"]["metadata"] = {"annotations": annotations}
        return out

    return make_job("pi", "ns", runLauncherAsWorker=launcher_as_worker, slotsPerWorker=slots,
                    mpiReplicaSpecs={"Launcher": spec(launcher), "Worker": spec(worker, workers)})


def workload(**assignments: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Workload", "status": {"admission": {"podSetAssignments": [
        {"name": name, "count": 1, "topologyAssignment": assignment} for name, assignment in assignments.items()]}}}


def hosts(*names: str, counts: list[int] | None = None) -> dict[str, Any]:
    """A hostname-level assignment, as Kueue stores it: a common prefix and the roots, pod counts per host."""
    pod_counts = {"individual": counts} if counts else {"universal": 1}
    return {"levels": [HOST], "slices": [{"domainCount": len(names), "podCounts": pod_counts, "valuesPerLevel": [
        {"individual": {"prefix": "node-", "roots": list(names)}}]}]}


def test_assignments_expand_to_one_domain_per_pod_slot() -> None:
    assignment = {"levels": ["block", "rack"], "slices": [
        {"domainCount": 2, "podCounts": {"individual": [2, 1]},
         "valuesPerLevel": [{"universal": "b0"}, {"individual": {"prefix": "r", "roots": ["1", "2"], "suffix": "x"}}]},
        {"domainCount": 1, "podCounts": {"universal": 2},
         "valuesPerLevel": [{"universal": "b1"}, {"individual": {"roots": ["r0"]}}]}]}
    assert list(expand_assignment(assignment)) == [
        "block=b0,rack=r1x", "block=b0,rack=r1x", "block=b0,rack=r2x", "block=b1,rack=r0", "block=b1,rack=r0"]


def pods(podsets: list[Any]) -> list[PodRank]:
    return [pod for podset in podsets for pod in podset.pods]


def test_workers_take_the_slots_of_their_index() -> None:
    placed = explain(job(4, worker={kt.REQUIRED: "rack"}, slots=2),
                     workload(worker=hosts("a", "b", counts=[3, 1])))
    assert [(p.fallback, p.offset, p.request) for p in placed] == [
        ("pi-launcher has no usable training.kubeflow.org/replica-index (None)", 0,
         "none (unconstrained when its flavor has a topology)"),
        (None, 0, "required rack")]
    assert pods(placed) == [
        PodRank("pi-launcher", "launcher", None, None, None, None),
        PodRank("pi-worker-0", "worker", "0", 0, range(0, 2), f"{HOST}=node-a"),
        PodRank("pi-worker-1", "worker", "1", 1, range(2, 4), f"{HOST}=node-a"),
        PodRank("pi-worker-2", "worker", "2", 2, range(4, 6), f"{HOST}=node-a"),
        PodRank("pi-worker-3", "worker", "3", 3, range(6, 8), f"{HOST}=node-b")]


def test_launcher_as_worker_offsets_the_workers_by_kueues_annotation() -> None:
    placed = explain(job(2, worker={kt.REQUIRED: "rack"}, launcher_as_worker=True),
                     workload(launcher=hosts("l"), worker=hosts("a", "b")))
    assert [(p.offset, p.offset_from, p.fallback) for p in placed] == [
        (0, "", None), (1, "1 from kueue.x-k8s.io/pod-index-offset (set by Kueue's webhook with runLauncherAsWorker)",
                        None)]
    assert pods(placed) == [
        PodRank("pi-launcher", "launcher", "0", 0, range(0, 1), f"{HOST}=node-l"),
        PodRank("pi-worker-0", "worker", "1", 0, range(1, 2), f"{HOST}=node-a"),
        PodRank("pi-worker-1", "worker", "2", 1, range(2, 3), f"{HOST}=node-b")]


def test_a_podset_group_offsets_the_larger_podset_by_the_smaller() -> None:
    group = {kt.GROUP: "mpi", kt.REQUIRED: "rack"}
    placed = explain(job(2, launcher=group, worker=group, launcher_as_worker=True))
    assert [(p.offset, p.offset_from, p.fallback) for p in placed] == [
        (0, "", None), (1, "1 from PodSet group 'mpi'", None)]
    assert [(p.pod, p.rank, p.domain) for p in pods(placed)] == [
        ("pi-launcher", 0, None), ("pi-worker-0", 0, None), ("pi-worker-1", 1, None)]


@pytest.mark.parametrize(("launcher_as_worker", "annotations", "fallback"), [
    pytest.param(False, {kt.GROUP: "mpi", kt.REQUIRED: "rack"}, "rank -1 of pi-worker-0 is below 0",
                 id="group without runLauncherAsWorker"),
    pytest.param(False, {kt.REQUIRED: "rack", kt.POD_INDEX_OFFSET: "2"}, "rank -2 of pi-worker-0 is below 0",
                 id="an offset that leaves ranks below 0"),
    pytest.param(False, {kt.REQUIRED: "rack", kt.POD_INDEX_OFFSET: "-1"}, "pi-worker-1 has no usable "
                 "training.kubeflow.org/replica-index ('1')", id="an offset that puts an index past the bound"),
])
def test_ranks_kueue_cannot_use_mean_greedy_placement(launcher_as_worker: bool, annotations: dict[str, str],
                                                      fallback: str) -> None:
    launcher = annotations if kt.GROUP in annotations else None
    placed = explain(job(2, launcher=launcher, worker=annotations, launcher_as_worker=launcher_as_worker),
                     workload(worker=hosts("a", "b")))
    assert placed[1].fallback == fallback
    assert [(p.rank, p.domain) for p in placed[1].pods] == [(None, None), (None, None)]


def test_an_assignment_smaller_than_the_podset_means_greedy_placement() -> None:
    placed = explain(job(3, worker={kt.REQUIRED: "rack"}), workload(worker=hosts("a", "b")))
    assert placed[1].fallback == "the assignment has 2 pod slots for 3 pods"


JOB = """\
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: pi}
spec:
  slotsPerWorker: 2
  runLauncherAsWorker: true
  mpiReplicaSpecs:
    Launcher:
      template: {spec: {containers: [{name: l, image: i}]}}
    Worker:
      replicas: 2
      template:
        metadata: {annotations: {kueue.x-k8s.io/podset-required-topology: example.com/rack}}
        spec: {containers: [{name: w, image: i}]}
"""


def test_the_command_prints_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "workload.yaml").write_text(yaml.safe_dump(
        {"kind": "List", "items": [workload(launcher=hosts("l"), worker=hosts("a", "b"))]}))
    argv = ["--explain-topology", str(tmp_path / "job.yaml"), "--workload", str(tmp_path / "workload.yaml")]
    assert render.main(argv) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out == (
        "MPIJob default/pi: mpirun gives MPI ranks in hostfile order, 2 per host, the launcher first "
        "(runLauncherAsWorker)\n"
        "PodSet launcher: 1 pod(s), topology none (unconstrained when its flavor has a topology); placed rank = "
        "replica-index minus 0; rank r takes the r-th pod slot of the assignment\n"
        "PodSet worker: 2 pod(s), topology required example.com/rack; placed rank = replica-index minus 1 (1 from "
        "kueue.x-k8s.io/pod-index-offset (set by Kueue's webhook with runLauncherAsWorker)); rank r takes the r-th "
        "pod slot of the assignment\n"
        "POD          PODSET    REPLICA-INDEX  KUEUE-RANK  MPI-RANKS  DOMAIN\n"
        "pi-launcher  launcher  0              0           0-1        kubernetes.io/hostname=node-l\n"
        "pi-worker-0  worker    1              0           2-3        kubernetes.io/hostname=node-a\n"
        "pi-worker-1  worker    2              1           4-5        kubernetes.io/hostname=node-b\n")


def test_a_workload_file_without_one_workload_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "empty.yaml").write_text("kind: List\nitems: []\n")
    assert render.main(["--explain-topology", str(tmp_path / "job.yaml"), "--workload",
                        str(tmp_path / "empty.yaml")]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"python -m reconciler render: error: {tmp_path / 'empty.yaml'}: expected one "
                              "Workload, found 0\n")
