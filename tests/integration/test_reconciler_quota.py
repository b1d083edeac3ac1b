"""Worker creates refused by a ResourceQuota: one Warning event per sync, not one per worker (issue 7)."""

from __future__ import annotations

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import mpijob
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl

HANG = {"test.mpijob/outcome": "hang"}


@pytest.fixture
def jobs(cluster: LocalCluster, namespace: str, reconciler: ReconcilerControl) -> Jobs:
    return Jobs(cluster, namespace)


def test_a_quota_failure_is_one_warning_event_per_sync(jobs: Jobs, cluster: LocalCluster,
                                                       reconciler: ReconcilerControl) -> None:
    quota = jobs.pod_quota("two-pods", 2)
    jobs.create(mpijob("pi", 6, launcher_labels=HANG))  # 2 workers fit, 4 are refused on every sync

    def failures() -> list[dict[str, str]]:
        return [e for e in jobs.events("pi") if e["reason"] == "MPIJobFailed"]

    until(lambda: len(failures()) >= 3 or None, timeout=60, what="three syncs failing on the quota")
    cluster.rest.request("DELETE", quota)
    jobs.wait_workers("pi", 6, timeout=60)
    jobs.wait_condition("pi", "Running", timeout=60)  # the syncs succeed again: no failure is still to come
    failed = f"msg=sync key={jobs.ns}/pi outcome=api_error"
    failed_syncs = sum(failed in line for line in reconciler.process.log.read_text(errors="replace").splitlines())
    events = failures()
    assert all(e["type"] == "Warning" and "exceeded quota" in e["message"] for e in events), events
    assert len(events) == failed_syncs, "one event per failed sync, however many workers it could not create"
