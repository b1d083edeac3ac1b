"""Removing the kustomize-deployed operator on the real node, as docs/operator-guide.md#uninstall gives it.

- The operator's removal keeps the jobs: `kubectl delete -k` of the deploy (the webhook configurations first)
  mid-job leaves the CRD, the MPIJob, its launcher Job and its worker pods running; deploying it again (the CRD
  step, then deploy/) adopts the job, which completes with the same pods.
- The full removal deletes every job on purpose: the MPIJobs, then the operator, then the CRD last.
- With the CRD alone (the operator removed) and with the webhook scaled to zero, kubectl get/describe/delete of
  MPIJobs, cascading deletion and namespace deletion work as with upstream's CRD (tests/e2e/reads.py).

Each test leaves the operator deployed again with kustomize (the CRD first), for the package's later tests.
The Helm path is tests/e2e/test_helm.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hack.devcluster.mpijobs import get_job
from hack.devcluster.operator_deploy import (
    AGGREGATED_ROLE,
    CRD_NAME,
    NAMESPACE,
    WEBHOOK,
    deploy,
    operator_objects,
    purge,
    remove,
    wait_ready,
)
from hack.devcluster.realnode import RealNodeCluster
from hack.devcluster.wait import wait_for
from tests.e2e.held import (
    assert_adopted,
    assert_completes,
    held_pi,
    is_running,
    launcher_job_uid,
    running_pods,
    wait_held,
)
from tests.e2e.jobs import apply
from tests.e2e.reads import check_reads, plant

CRD = ("CustomResourceDefinition", "", CRD_NAME)


@pytest.fixture
def redeployed(real_cluster: RealNodeCluster, tmp_path: Path) -> Iterator[Path]:
    """A work directory for the test's removals and deploys; afterwards the operator deployed again if the test
    left it removed (or half removed)."""
    try:
        yield tmp_path
    finally:
        if ("Namespace", "", NAMESPACE) not in operator_objects(real_cluster) or not real_cluster.rest.get(
                f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments").get("items"):
            deploy(real_cluster, tmp_path / "restored")


def _children(cluster: RealNodeCluster, namespace: str, name: str) -> dict[str, list[str]]:
    """What the MPIJob NAME owns (the reconciler made it), by kind: what the garbage collector deletes with it."""
    paths = {"pods": f"/api/v1/namespaces/{namespace}/pods", "jobs": f"/apis/batch/v1/namespaces/{namespace}/jobs",
             **{kind: f"/api/v1/namespaces/{namespace}/{kind}" for kind in ("configmaps", "secrets", "services")}}
    found = {kind: [o["metadata"]["name"] for o in cluster.rest.get(path)["items"]
                    if any(ref["kind"] == "MPIJob" and ref["name"] == name
                           for ref in o["metadata"].get("ownerReferences") or [])]
             for kind, path in paths.items()}
    return {kind: names for kind, names in found.items() if names}


def test_operator_removed_mid_job_keeps_it_and_a_redeploy_completes_it(real_cluster: RealNodeCluster, namespace: str,
                                                                      redeployed: Path) -> None:
    apply(real_cluster, namespace, held_pi("pi"))
    before = wait_held(real_cluster, namespace, "pi")
    wait_for(lambda: is_running(real_cluster, namespace, "pi"), 60, 0.5, what="the job's Running condition")
    launcher = launcher_job_uid(real_cluster, namespace, "pi")
    planted = plant(real_cluster, "crd-alone")

    began = time.monotonic()
    recreated = remove(real_cluster, redeployed)  # kubectl delete -k, the webhook configurations first
    print(f"\nkubectl delete -k: the operator gone in {time.monotonic() - began:.1f} s "
          f"(an empty {AGGREGATED_ROLE} re-created by Kubernetes and deleted: {recreated})")
    assert operator_objects(real_cluster) == {CRD}
    assert get_job(real_cluster, namespace, "pi")["metadata"]["name"] == "pi"
    assert running_pods(real_cluster, namespace, "pi") == before
    assert launcher_job_uid(real_cluster, namespace, "pi") == launcher
    check_reads(real_cluster, planted)  # the CRD alone: nothing of ours in the read path

    timings = deploy(real_cluster, redeployed)  # kubectl apply -k deploy/crds/, then deploy/
    print(f"deployed again: {timings}")
    assert_adopted(real_cluster, namespace, "pi", before, launcher)

    assert_completes(real_cluster, namespace, "pi", before)


def test_reads_with_the_webhook_scaled_to_zero(real_cluster: RealNodeCluster) -> None:
    """The webhook Deployment at zero replicas, its configurations still registered: writes of MPIJobs are refused
    (the validating webhook fails closed), reads and deletions work."""
    planted = plant(real_cluster, "webhook-zero")
    pods = f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app.kubernetes.io/name={WEBHOOK}"
    real_cluster.kubectl("-n", NAMESPACE, "scale", "deployment", WEBHOOK, "--replicas=0", check=True)
    try:
        wait_for(lambda: not real_cluster.rest.get(pods)["items"], 120, 0.5, what="no webhook pod left")
        check_reads(real_cluster, planted)
    finally:
        real_cluster.kubectl("-n", NAMESPACE, "scale", "deployment", WEBHOOK, "--replicas=2", check=True)
        wait_ready(real_cluster)


def test_full_removal_deletes_every_job_then_the_crd(real_cluster: RealNodeCluster, namespace: str,
                                                     redeployed: Path) -> None:
    apply(real_cluster, namespace, held_pi("pi"))
    wait_held(real_cluster, namespace, "pi")
    made = _children(real_cluster, namespace, "pi")
    assert {"pods", "jobs", "configmaps", "secrets", "services"} <= made.keys(), made

    began = time.monotonic()
    purge(real_cluster, redeployed)
    assert operator_objects(real_cluster) == set()
    crd = real_cluster.kubectl("get", "crd", CRD_NAME)
    assert crd.returncode != 0
    assert "NotFound" in crd.stderr
    wait_for(lambda: not _children(real_cluster, namespace, "pi"), 120, 0.5,
             what="the job's pods, launcher Job, ConfigMap, Secret and Service deleted with it")
    print(f"\nfull removal: the jobs, the operator and the CRD gone in {time.monotonic() - began:.1f} s")
