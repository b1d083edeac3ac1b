"""The operator as a cluster admin deploys it (`kubectl apply --server-side -k`, manual certificates),
from the images Dockerfile.webhook and Dockerfile.reconciler build: every e2e test runs through it."""

from __future__ import annotations

from hack.devcluster import LocalCluster
from hack.devcluster.operator_deploy import NAMESPACE, RECONCILER, WEBHOOK, lease_holder
from tests.e2e.conftest import DEPLOY_TIMINGS


def _pods(cluster: LocalCluster, name: str) -> list[dict]:  # type: ignore[type-arg]
    items = cluster.rest.get(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app.kubernetes.io/name={name}")
    return list(items.get("items", []))


def test_operator_runs_as_restricted_pods_from_its_images(real_cluster: LocalCluster) -> None:
    namespace = real_cluster.rest.get(f"/api/v1/namespaces/{NAMESPACE}")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for name, image in ((WEBHOOK, "mpijob-operator/webhook:dev"), (RECONCILER, "mpijob-operator/reconciler:dev")):
        pods = _pods(real_cluster, name)
        assert pods, name
        for pod in pods:
            assert pod["status"]["phase"] == "Running", pod["status"]
            assert pod["spec"]["nodeName"] == "real-node"
            container = pod["spec"]["containers"][0]
            assert container["image"] == image
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    print(f"\ndeploy: seconds after kubectl apply -k: {DEPLOY_TIMINGS}")


def test_webhook_is_ready_behind_its_service(real_cluster: LocalCluster) -> None:
    slices = real_cluster.rest.get(f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices"
                                   f"?labelSelector=kubernetes.io/service-name={WEBHOOK}")["items"]
    ready = [e for s in slices for e in s.get("endpoints") or [] if (e.get("conditions") or {}).get("ready")]
    assert len(ready) == len(_pods(real_cluster, WEBHOOK)) >= 1, slices


def test_reconciler_holds_its_lease_under_its_service_account(real_cluster: LocalCluster) -> None:
    (pod,) = _pods(real_cluster, RECONCILER)
    assert lease_holder(real_cluster).startswith(pod["metadata"]["name"])
    assert pod["spec"]["serviceAccountName"] not in ("", "default")
