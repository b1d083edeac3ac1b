"""The operator as a Helm release on the real node, as docs/operator-guide.md gives it ("With Helm", "Uninstall"):
`helm install` of deploy/chart/mpi-operator with the images as imported and the manual certificates, a real
MPI job, `helm upgrade` while a job runs, `helm uninstall` while a job runs (the job, its launcher and its
workers stay) and `helm install` again (the job is adopted and completes), then a last `helm uninstall` that
leaves exactly the CRD.

The module swaps the kustomize-deployed operator of the package (conftest.py) for the release: it removes the
operator's objects keeping the CRD (`kubectl delete -k`, docs/operator-guide.md#uninstall), and deploys it
again with kustomize at the end, whatever happened, for the package's later tests. The tests run in the
order of this file: the last one uninstalls the release.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hack.devcluster import HarnessError
from hack.devcluster.helm import RELEASE, RELEASE_NAMESPACE, find_helm, helm, render_chart
from hack.devcluster.mpijobs import JSON, get_job
from hack.devcluster.operator_deploy import (
    AGGREGATED_ROLE,
    CRD_NAME,
    NAMESPACE,
    RECONCILER,
    WEBHOOK,
    Key,
    deploy,
    exists,
    helm_flags,
    helm_install,
    helm_release,
    helm_uninstall,
    helm_upgrade,
    key,
    lease_holder,
    operator_objects,
    remove,
    remove_recreated_role,
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
from tests.e2e.jobs import apply, assert_pi, run_to_success, upstream_pi
from tests.e2e.reads import check_reads, plant

CRD = ("CustomResourceDefinition", "", CRD_NAME)
IMAGES = {WEBHOOK: "mpijob-operator/webhook:dev", RECONCILER: "mpijob-operator/reconciler:dev"}
# A changed value for each Deployment: a rolling update of both (new pods), the reconciler's Lease handed over.
UPGRADE = {"reconciler.threadiness": "8", "webhook.resources.limits.memory": "320Mi"}


@dataclass
class Release:
    binary: Path
    work_dir: Path  # the manual certificates, kept for a reinstall
    timings: dict[str, float] = field(default_factory=dict)


@pytest.fixture(scope="module")
def release(real_cluster: RealNodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    """The package's operator removed (the CRD kept) and the chart installed in its place; at the end the release
    uninstalled if it is still there, and the operator deployed with kustomize again."""
    try:
        binary = find_helm()
    except HarnessError as exc:
        pytest.skip(f"helm is not available: {exc}")
    work_dir = tmp_path_factory.mktemp("helm")
    try:
        remove(real_cluster, work_dir / "kustomize")
        assert operator_objects(real_cluster) == {CRD}
        yield Release(binary, work_dir, helm_install(real_cluster, binary, work_dir))
    finally:
        if RELEASE in helm(binary, "list", f"--namespace={RELEASE_NAMESPACE}", "--short",
                           kubeconfig=real_cluster.kubeconfig).split():
            helm_uninstall(real_cluster, binary)
        deploy(real_cluster, work_dir / "kustomize-again")


def _pods(cluster: RealNodeCluster, name: str) -> list[JSON]:
    """The operator's pods of Deployment NAME (by its pods' app.kubernetes.io/name), those being deleted included."""
    found: list[JSON] = cluster.rest.get(
        f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app.kubernetes.io/name={name}")["items"]
    return found


def _rolled_out(cluster: RealNodeCluster, name: str, old: set[str]) -> list[str] | None:
    """Deployment NAME's pods after a rolling update: as many as its replicas, none of the OLD pods left, each
    Running and Ready; their names, else None."""
    dep = cluster.rest.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}")
    status = dep.get("status") or {}
    pods = _pods(cluster, name)
    ready = [p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions", []))]
    done = (status.get("observedGeneration") == dep["metadata"]["generation"]
            and status.get("updatedReplicas") == status.get("replicas") == status.get("availableReplicas")
            == dep["spec"]["replicas"] == len(pods) == len(ready) and not old & set(ready))
    return ready if done else None


def _wait_rolled_out(cluster: RealNodeCluster, name: str, old: set[str]) -> list[str]:
    pods = wait_for(lambda: _rolled_out(cluster, name, old), 180, 0.5, what=f"{name} rolled out")
    assert pods is not None
    return pods


def _expected_release(release: Release) -> set[Key]:
    """What the release holds: every object the chart renders with the install's values, the CRD included (the
    kustomize deploy's, adopted; crds.keep: left by `helm uninstall`)."""
    rendered = render_chart(release.binary, helm_flags(release.work_dir / "webhook-certs"))
    return {key(doc) for doc in rendered}


def test_helm_install_replaces_the_kustomize_deploy_and_runs_a_job(real_cluster: RealNodeCluster, release: Release,
                                                                  namespace: str) -> None:
    print(f"\nhelm install: seconds to each step: {release.timings}")
    objects = helm_release(real_cluster, release.binary)
    assert {key(doc) for doc in objects} == _expected_release(release)
    for name, image in IMAGES.items():
        dep = real_cluster.rest.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}")
        assert dep["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
        pods = _pods(real_cluster, name)
        assert len(pods) == dep["spec"]["replicas"]
        assert {p["spec"]["containers"][0]["image"] for p in pods} == {image}
        assert all(p["spec"]["nodeName"] == "real-node" and p["status"]["phase"] == "Running" for p in pods)
    (reconciler,) = _pods(real_cluster, RECONCILER)
    assert lease_holder(real_cluster).startswith(reconciler["metadata"]["name"])
    crd = real_cluster.rest.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")
    assert {k: v for k, v in crd["metadata"]["annotations"].items() if "helm.sh/" in k} == {
        "meta.helm.sh/release-name": RELEASE, "meta.helm.sh/release-namespace": RELEASE_NAMESPACE,
        "helm.sh/resource-policy": "keep"}, "the kustomize deploy's CRD, adopted by the release"

    log, took = run_to_success(real_cluster, namespace, upstream_pi("openmpi", "pi"))
    assert_pi(log, ["pi-worker-0", "pi-worker-1"])
    print(f"pi under the Helm release: Succeeded in {took:.1f} s")


def test_helm_upgrade_rolls_the_operator_while_a_job_keeps_running(real_cluster: RealNodeCluster, release: Release,
                                                                  namespace: str) -> None:
    apply(real_cluster, namespace, held_pi("pi"))
    before = wait_held(real_cluster, namespace, "pi")
    wait_for(lambda: is_running(real_cluster, namespace, "pi"), 60, 0.5, what="the job's Running condition")
    launcher = launcher_job_uid(real_cluster, namespace, "pi")
    old = {name: {p["metadata"]["name"] for p in _pods(real_cluster, name)} for name in IMAGES}

    began = time.monotonic()
    helm_upgrade(real_cluster, release.binary, UPGRADE)
    rolled = {name: _wait_rolled_out(real_cluster, name, old[name]) for name in IMAGES}
    (new_reconciler,) = rolled[RECONCILER]
    wait_for(lambda: lease_holder(real_cluster).startswith(new_reconciler + "_"), 60, 0.5,
             what="the new reconciler pod holding the Lease")
    print(f"\nhelm upgrade: both rolled out, the new reconciler leading, in {time.monotonic() - began:.1f} s")
    reconciler = real_cluster.rest.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{new_reconciler}")
    assert "--threadiness=8" in reconciler["spec"]["containers"][0]["args"]
    for pod in rolled[WEBHOOK]:
        spec = real_cluster.rest.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}")["spec"]
        assert spec["containers"][0]["resources"]["limits"]["memory"] == "320Mi"

    # The new leader has seen the job and kept it as it was: the same pods, launcher Job, still running.
    assert_adopted(real_cluster, namespace, "pi", before, launcher)

    final = assert_completes(real_cluster, namespace, "pi", before)
    assert final["status"]["replicaStatuses"]["Launcher"] == {"succeeded": 1}


def test_helm_uninstall_mid_job_keeps_it_and_a_reinstall_completes_it(real_cluster: RealNodeCluster,
                                                                     release: Release, namespace: str) -> None:
    apply(real_cluster, namespace, held_pi("pi"))
    before = wait_held(real_cluster, namespace, "pi")
    wait_for(lambda: is_running(real_cluster, namespace, "pi"), 60, 0.5, what="the job's Running condition")
    launcher = launcher_job_uid(real_cluster, namespace, "pi")

    began = time.monotonic()
    recreated = helm_uninstall(real_cluster, release.binary)  # returns once the operator's namespace is gone
    print(f"\nhelm uninstall: the operator gone in {time.monotonic() - began:.1f} s "
          f"(an empty {AGGREGATED_ROLE} re-created by Kubernetes and deleted: {recreated})")
    assert operator_objects(real_cluster) == {CRD}
    assert get_job(real_cluster, namespace, "pi")["metadata"]["name"] == "pi"  # through v2beta1: no conversion
    assert running_pods(real_cluster, namespace, "pi") == before
    assert launcher_job_uid(real_cluster, namespace, "pi") == launcher

    began = time.monotonic()
    timings = helm_install(real_cluster, release.binary, release.work_dir)
    print(f"helm install again: {timings}")
    assert_adopted(real_cluster, namespace, "pi", before, launcher)
    print(f"the job adopted {time.monotonic() - began:.1f} s after helm install")
    assert_completes(real_cluster, namespace, "pi", before)


def test_helm_uninstall_leaves_exactly_the_crd(real_cluster: RealNodeCluster, release: Release) -> None:
    objects = helm_release(real_cluster, release.binary)
    assert {key(doc) for doc in objects} == _expected_release(release)
    cluster_scoped = {k for k in map(key, objects) if not k[1]}
    assert {kind for kind, _, _ in cluster_scoped} == {
        "Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass", "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration", "CustomResourceDefinition"}
    planted = plant(real_cluster, "helm-uninstalled")

    helm_uninstall(real_cluster, release.binary, clean_up=False)
    left = [key(doc) for doc in objects if key(doc) != CRD and exists(real_cluster, doc)]  # the CRD is kept
    # At most the empty role kube-controller-manager may re-create (remove_recreated_role), which the guide's
    # uninstall deletes next; remove_recreated_role fails if it is anything else.
    assert set(left) <= {("ClusterRole", "", AGGREGATED_ROLE)}, "objects of the release that helm uninstall left"
    assert remove_recreated_role(real_cluster) == bool(left)
    print(f"\nhelm uninstall: an empty {AGGREGATED_ROLE} re-created by Kubernetes and deleted: {bool(left)}")
    assert [key(doc) for doc in objects if exists(real_cluster, doc)] == [CRD]
    assert operator_objects(real_cluster) == {CRD}
    assert helm(release.binary, "list", "--all-namespaces", "--short", "--uninstalled", "--uninstalling", "--pending",
                kubeconfig=real_cluster.kubeconfig).split() == []
    check_reads(real_cluster, planted)  # after the documented uninstall: the CRD alone
