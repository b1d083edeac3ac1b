"""Gang scheduling on the real node: upstream's pi example with the deployed reconciler's `--gang-scheduling`
set as an admin sets it, under each backend that runs here: scheduler-plugins' Coscheduling (a second
scheduler, `scheduler-plugins-scheduler`, with its PodGroup controller) and kube-scheduler's own gangs (the
Workload API, `--gang-scheduling=kube-scheduler`, which the harness's control plane enables). Every pod of
the job is placed by that backend, as one gang, and the job computes pi on its workers. Volcano is not run:
no module the Go proxy serves here contains its scheduler (docs/operator-guide.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hack.devcluster.coscheduling import (
    SCHEDULER_NAME,
    Coscheduling,
    SchedulerPluginsUnavailableError,
    find_scheduler_plugins,
)
from hack.devcluster.mpijobs import JSON
from hack.devcluster.realnode import RealNodeCluster
from tests.e2e.jobs import assert_pi, reconciler_flag, run_to_success, upstream_pi

DEFAULT_SCHEDULER = "default-scheduler"


@pytest.fixture
def coscheduling(real_cluster: RealNodeCluster, tmp_path: Path) -> Iterator[None]:
    try:
        build = find_scheduler_plugins()
    except SchedulerPluginsUnavailableError as err:
        pytest.skip(str(err))
    gang = Coscheduling(real_cluster, tmp_path / "coscheduling", build)
    gang.install_crds()
    gang.start()
    try:
        gang.wait_ready()
        yield
    finally:
        gang.stop()


def _scheduled_by(cluster: RealNodeCluster, namespace: str) -> dict[str, str]:
    """Pod -> the scheduler that reported binding it (its Scheduled event); the launcher's pod, named by its
    Job with a random suffix, as ``gang-launcher``."""
    events: list[JSON] = cluster.rest.get(f"/api/v1/namespaces/{namespace}/events").get("items", [])
    placed = {}
    for event in (e for e in events if e["reason"] == "Scheduled"):
        pod = event["involvedObject"]["name"]
        pod = "gang-launcher" if pod.startswith("gang-launcher-") else pod
        placed[pod] = event.get("reportingComponent") or event["source"].get("component", "")
    return placed


def _launcher_pod(cluster: RealNodeCluster, namespace: str) -> JSON:
    pods = cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods"
                            "?labelSelector=training.kubeflow.org/job-role=launcher")["items"]
    assert len(pods) == 1, pods
    pod: JSON = pods[0]
    return pod


@pytest.mark.usefixtures("coscheduling")
def test_coscheduling_places_the_job_as_one_gang(real_cluster: RealNodeCluster, namespace: str) -> None:
    with reconciler_flag(real_cluster, f"--gang-scheduling={SCHEDULER_NAME}"):
        log, _ = run_to_success(real_cluster, namespace, upstream_pi("openmpi", "gang"))
    assert_pi(log, ["gang-worker-0", "gang-worker-1"])
    assert _scheduled_by(real_cluster, namespace) == {
        "gang-worker-0": SCHEDULER_NAME, "gang-worker-1": SCHEDULER_NAME, "gang-launcher": SCHEDULER_NAME}
    launcher = _launcher_pod(real_cluster, namespace)
    assert launcher["spec"]["schedulerName"] == SCHEDULER_NAME
    assert launcher["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "gang"


def test_kube_scheduler_places_the_job_as_one_gang(real_cluster: RealNodeCluster, namespace: str) -> None:
    with reconciler_flag(real_cluster, "--gang-scheduling=kube-scheduler"):
        log, _ = run_to_success(real_cluster, namespace, upstream_pi("openmpi", "gang"))
    assert_pi(log, ["gang-worker-0", "gang-worker-1"])
    assert _scheduled_by(real_cluster, namespace) == {
        "gang-worker-0": DEFAULT_SCHEDULER, "gang-worker-1": DEFAULT_SCHEDULER, "gang-launcher": DEFAULT_SCHEDULER}
    launcher = _launcher_pod(real_cluster, namespace)
    assert launcher["spec"]["schedulingGroup"] == {"podGroupName": "gang"}
    assert launcher["spec"]["schedulerName"] == DEFAULT_SCHEDULER
