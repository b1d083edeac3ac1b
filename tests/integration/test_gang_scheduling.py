"""Gang scheduling with a real API server: the reconciler manages the job's PodGroup (e2e 12 and 13).

No gang scheduler runs here, so gang-scheduled pods stay Pending, which is what upstream's e2e checks
while a PodGroup's minResources cannot be met.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.wait import wait_for
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl

CRDS = Path(__file__).resolve().parent / "crds" / "podgroups.yaml"
GROUPS = {"volcano": "scheduling.volcano.sh/v1beta1", "scheduler-plugins-scheduler": "scheduling.x-k8s.io/v1alpha1"}


@pytest.fixture(params=list(GROUPS), ids=["volcano", "scheduler-plugins"])
def gang(request: pytest.FixtureRequest, cluster: LocalCluster, reconciler: ReconcilerControl) -> Iterator[str]:
    cluster.kubectl("apply", "-f", str(CRDS), check=True)
    cluster.kubectl("wait", "--for=condition=Established", "-f", str(CRDS), "--timeout=60s", check=True)
    name: str = request.param
    reconciler.restart(f"--gang-scheduling={name}")
    try:
        yield name
    finally:
        reconciler.restart()


def test_pod_group_is_managed(cluster: LocalCluster, namespace: str, gang: str) -> None:
    jobs = Jobs(cluster, namespace)
    policy = {"cleanPodPolicy": "Running", "schedulingPolicy": {
        "minResources": {"cpu": "100000", "memory": "100000Gi"}, "scheduleTimeoutSeconds": 900}}
    jobs.create(mpijob("pi", 2, runPolicy=policy))
    group = until(lambda: jobs.object("podgroups", "pi", GROUPS[gang]), timeout=30, what="the PodGroup")
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["minResources"] == {"cpu": "100k", "memory": "100000Gi"}
    assert group["metadata"]["ownerReferences"][0]["kind"] == "MPIJob"
    workers = jobs.wait_workers("pi", 2)
    assert {p["spec"]["schedulerName"] for p in workers} == {gang}
    assert {p["status"].get("phase") for p in workers} == {"Pending"}
    jobs.patch("pi", {"spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}})
    wait_for(lambda: jobs.must("podgroups", "pi", GROUPS[gang])["spec"]["minMember"] == 2, timeout=30,
             what="the PodGroup following minAvailable")
    jobs.patch("pi", {"spec": {"runPolicy": {"suspend": True}}})
    jobs.wait_gone("podgroups", "pi", GROUPS[gang])
    jobs.wait_workers("pi", 0)
