"""API Priority and Fairness pushing back on the reconciler, as it would on a busy cluster.

With no client-side rate limit by default, the API server's Priority and Fairness is what keeps the
reconciler in check. Here a FlowSchema puts the reconciler's pod creates (its ServiceAccount, as
shipped) into a priority level of 3 seats that rejects at once when they are taken: most of a large
job's concurrent creates get 429. The job must still run to Succeeded, every worker created exactly once,
and the audit log must show the 429s really happened (a test that cannot fail otherwise).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.audit import audit_events, resource_of
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.operators import reconciler_service_account
from hack.devcluster.rest import ApiError
from tests.integration.mpijobs import Jobs
from tests.integration.operator_fixtures import ReconcilerControl

FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
LEVEL = "mpijob-test-tight"
WORKERS = 96


def _priority_level() -> dict[str, object]:
    # Shares 1 of ~246 in total over 600 seats: ceil(600 / 246) = 3 seats; no borrowing, no queue.
    return {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": LEVEL},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "lendablePercent": 0,
                                                    "borrowingLimitPercent": 0,
                                                    "limitResponse": {"type": "Reject"}}}}


def _flow_schema(namespace: str, account: str) -> dict[str, object]:
    # Only pod creates: the Lease renewals and the watches keep their usual priority levels.
    return {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": LEVEL},
            "spec": {"priorityLevelConfiguration": {"name": LEVEL}, "matchingPrecedence": 100,
                     "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": [{"kind": "ServiceAccount",
                                              "serviceAccount": {"namespace": namespace, "name": account}}],
                                "resourceRules": [{"verbs": ["create"], "apiGroups": [""], "resources": ["pods"],
                                                   "namespaces": ["*"]}]}]}}


@pytest.fixture
def tight_pod_creates(cluster: LocalCluster) -> Iterator[str]:
    """The reconciler's pod creates limited to 3 seats; yields its user name."""
    namespace, account = reconciler_service_account()
    created: list[str] = []
    try:
        for plural, body in (("prioritylevelconfigurations", _priority_level()),
                             ("flowschemas", _flow_schema(namespace, account))):
            cluster.rest.create(f"{FLOWCONTROL}/{plural}", body)
            created.append(plural)
        yield f"system:serviceaccount:{namespace}:{account}"
    finally:
        for plural in reversed(created):
            try:
                cluster.rest.request("DELETE", f"{FLOWCONTROL}/{plural}/{LEVEL}")
            except ApiError as error:
                if error.status != 404:
                    raise


def test_429s_from_priority_and_fairness_slow_the_job_but_lose_and_duplicate_nothing(
        cluster: LocalCluster, namespace: str, reconciler: ReconcilerControl, tight_pod_creates: str) -> None:
    assert cluster.audit_log is not None
    offset = cluster.audit_log.stat().st_size if cluster.audit_log.exists() else 0
    jobs = Jobs(cluster, namespace)
    jobs.create(mpijob("throttled", WORKERS, runPolicy={"cleanPodPolicy": "None"}))  # the workers stay to be counted
    jobs.wait_condition("throttled", "Succeeded", timeout=240)

    creates = [event for event in audit_events(cluster.audit_log, offset=offset)
               if event.get("stage") == "ResponseComplete" and event.get("verb") == "create"
               and resource_of(event) == "pods" and (event.get("objectRef") or {}).get("namespace") == namespace
               and event["user"]["username"] == tight_pod_creates]
    codes = Counter(event["responseStatus"]["code"] for event in creates)
    answered = {code: Counter(event["objectRef"].get("name") for event in creates
                              if event["responseStatus"]["code"] == code) for code in codes}
    expected = sorted(f"throttled-worker-{i}" for i in range(WORKERS))
    assert codes[429] > 0, f"Priority and Fairness never pushed back: {dict(codes)}"
    # No AlreadyExists (409): no create was repeated after it landed. A 504 is the API server timing a create out on a
    # saturated machine: the pod may have landed anyway, and the informer then shows it before any retry.
    assert set(codes) <= {201, 429, 504}, dict(codes)
    assert sorted(pod["metadata"]["name"] for pod in jobs.workers("throttled")) == expected
    created = answered.get(201, Counter())
    assert set(created.values()) <= {1}, f"a worker created twice: {created}"
    timed_out = set(answered.get(504, Counter()))
    assert sorted(set(created) | timed_out) == expected, (sorted(created), sorted(timed_out))
    assert reconciler.process.alive()
    print(f"pod creates answered: {dict(codes)}")
