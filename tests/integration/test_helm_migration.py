"""docs/migration.md, "With Helm": from upstream's install (`kubectl apply --server-side -f
deploy/v2beta1/mpi-operator.yaml` of github.com/kubeflow/mpi-operator v0.8.2, the module hack/build/build-peer.sh
downloads) to a release of the chart, on a real API server, with an MPIJob stored under upstream's CRD:

- the CRD first (`kubectl apply --server-side --force-conflicts -k deploy/crds/`), then either upstream's operator
  objects deleted (its Namespace and the CRD adopted) or every one of them adopted and `helm install
  --force-conflicts`: the install succeeds, the CRD is ours (printer columns, status.readyWorkers and restartCount),
  the MPIJob is the same object, upstream's Deployment is gone or is ours under the same UID;
- without that step, `helm install` is refused on upstream's Namespace (invalid ownership metadata), adopting
  without `--force-conflicts` is refused with kubectl's conflicts, and with `crds.enabled=false` the install
  succeeds and leaves upstream's CRD in place, which the documented check shows (no printer columns); a failed
  release is completed by `helm upgrade --force-conflicts`, while `helm uninstall` of it deletes the Namespace;
- chart upgrades: a newer chart's CRD reaches the cluster by `helm upgrade --reset-then-reuse-values` alone; a
  `kubectl apply --server-side` of a newer CRD over the release's is refused with a conflict with "helm" until
  `--force-conflicts`, and the next `helm upgrade` then needs `--force-conflicts` too.

Each test has a control plane of its own (one kwok node, a few seconds to start): the chart's cluster-wide objects
have the names of upstream's and of the operator the other integration tests deploy. The images never run (kwok
plays the pods), so the Lease handover itself is not exercised here: tests/integration/test_handover.py runs it with
the real Go operator.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.devcluster import HarnessError, LocalCluster, wait_for
from hack.devcluster.binaries import find_bin_dir
from hack.devcluster.helm import CHART, RELEASE, RELEASE_NAMESPACE, helm, render_chart, value_flags
from hack.devcluster.operator_deploy import CRDS, HELM_IMAGES, remove_recreated_role
from hack.devcluster.operators import PeerBuildError, build_peer

Doc = dict[str, Any]
CHART_CRD = CHART / "files" / "crds" / "kubeflow.org_mpijobs.yaml"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/mpijobs.kubeflow.org"
DEPLOYMENT_PATH = "/apis/apps/v1/namespaces/mpi-operator/deployments/mpi-operator"
JOB_PATH = "/apis/kubeflow.org/v2beta1/namespaces/jobs/mpijobs/pi"
# The check docs/migration.md gives: our CRD's printer columns, none on upstream's.
COLUMNS_CHECK = "jsonpath={.spec.versions[?(@.name==\"v2beta1\")].additionalPrinterColumns[*].name}"
OUR_COLUMNS = "State Workers Ready Restarts Implementation Slots Workers-Reason Age"
# Upstream's objects that the chart also renders, as docs/migration.md lists them (kind, namespace, name).
UPSTREAM_OPERATOR = [("deployment", "mpi-operator", "mpi-operator"), ("serviceaccount", "mpi-operator", "mpi-operator"),
                     ("clusterrolebinding", "", "mpi-operator"), ("clusterrole", "", "mpi-operator"),
                     ("clusterrole", "", "kubeflow-mpijobs-admin"), ("clusterrole", "", "kubeflow-mpijobs-edit"),
                     ("clusterrole", "", "kubeflow-mpijobs-view")]
KEPT = [("namespace", "", "mpi-operator"), ("customresourcedefinition", "", "mpijobs.kubeflow.org")]
VALUES = {**HELM_IMAGES, "certificates.mode": "managed"}
MPIJOB = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "pi", "namespace": "jobs"},
          "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {
              "Launcher": {"replicas": 1, "template": {"spec": {"containers": [
                  {"name": "launcher", "image": "mpioperator/mpi-pi:openmpi", "command": ["mpirun", "/home/pi"]}]}}},
              "Worker": {"replicas": 2, "template": {"spec": {"containers": [
                  {"name": "worker", "image": "mpioperator/mpi-pi:openmpi"}]}}}}}}


@pytest.fixture(scope="module")
def upstream_manifest() -> Path:
    """Upstream's deploy/v2beta1/mpi-operator.yaml, from the module hack/build/build-peer.sh downloads."""
    try:
        binary = build_peer()
    except PeerBuildError as exc:
        if shutil.which("go") is None:
            pytest.skip("Go is not installed: upstream's v0.8.2 module cannot be downloaded (hack/build/build-peer.sh)")
        raise HarnessError(str(exc)) from exc
    return binary.parents[1] / "src" / "deploy" / "v2beta1" / "mpi-operator.yaml"


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(nodes=1, bin_dir=find_bin_dir()) as local:
        yield local


def kubectl(cluster: LocalCluster, *args: str) -> str:
    return cluster.kubectl(*args, check=True).stdout


def install_upstream(cluster: LocalCluster, manifest: Path) -> Doc:
    """Upstream's install as its README gives it, and an MPIJob stored under its CRD: the stored MPIJob."""
    kubectl(cluster, "apply", "--server-side", "-f", str(manifest))
    wait_for(lambda: established(cluster), timeout=60, what="upstream's CRD established")
    kubectl(cluster, "create", "namespace", "jobs")
    cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(MPIJOB), check=True)
    return cluster.rest.get(JOB_PATH)


def established(cluster: LocalCluster) -> bool:
    conditions = (cluster.rest.get(CRD_PATH).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def exists(cluster: LocalCluster, kind: str, namespace: str, name: str) -> bool:
    proc = cluster.kubectl("get", kind, name, *([f"--namespace={namespace}"] if namespace else []), "-o", "name")
    if proc.returncode != 0:
        assert "NotFound" in proc.stderr, proc.stderr
        return False
    return True


def adopt(cluster: LocalCluster, objects: list[tuple[str, str, str]]) -> None:
    """docs/migration.md's two commands: Helm's ownership label and annotations on every object at once (the
    namespaced ones are in mpi-operator; kubectl ignores -n for the others)."""
    names = [f"{kind}/{name}" for kind, _, name in objects]
    kubectl(cluster, "-n", "mpi-operator", "label", *names, "app.kubernetes.io/managed-by=Helm")
    kubectl(cluster, "-n", "mpi-operator", "annotate", *names, f"meta.helm.sh/release-name={RELEASE}",
            f"meta.helm.sh/release-namespace={RELEASE_NAMESPACE}")


def install(helm_binary: Path, cluster: LocalCluster, *flags: str, chart: Path = CHART) -> str:
    return helm(helm_binary, "install", RELEASE, str(chart), f"--namespace={RELEASE_NAMESPACE}",
                *value_flags(VALUES), *flags, kubeconfig=cluster.kubeconfig)


def status_properties(crd: Doc) -> list[str]:
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v2beta1")
    return sorted(version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"])


def our_crd(cluster: LocalCluster) -> Doc:
    crd: Doc = yaml.safe_load(kubectl(cluster, "kustomize", str(CRDS)))
    return crd


def assert_ours(cluster: LocalCluster, helm_binary: Path, job: Doc) -> None:
    """The CRD's spec is ours (deploy/crds/) and held by the release, every object the chart renders exists, and the
    MPIJob stored under upstream's CRD is the same object, unchanged."""
    stored = cluster.rest.get(CRD_PATH)
    assert stored["spec"]["versions"] == our_crd(cluster)["spec"]["versions"]
    assert {"readyWorkers", "restartCount"} <= set(status_properties(stored))
    assert kubectl(cluster, "get", "crd", "mpijobs.kubeflow.org", "-o", COLUMNS_CHECK) == OUR_COLUMNS
    assert {k: v for k, v in stored["metadata"]["annotations"].items() if k.startswith("meta.helm.sh/")} == {
        "meta.helm.sh/release-name": RELEASE, "meta.helm.sh/release-namespace": RELEASE_NAMESPACE}
    rendered = render_chart(helm_binary, value_flags(VALUES))
    missing = [f"{o['kind']}/{o['metadata']['name']}" for o in rendered
               if not exists(cluster, o["kind"].lower(), o["metadata"].get("namespace", ""), o["metadata"]["name"])]
    assert missing == []
    after = cluster.rest.get(JOB_PATH)
    assert (after["metadata"]["uid"], after["spec"]) == (job["metadata"]["uid"], job["spec"])


def our_pod_template(cluster: LocalCluster, helm_binary: Path) -> Doc:
    """The pod template of the chart's Deployment mpi-operator as the API server stores it (defaults included): a
    server-side dry run of its creation in the namespace jobs."""
    rendered = render_chart(helm_binary, value_flags(VALUES))
    deployment = next(o for o in rendered if o["kind"] == "Deployment" and o["metadata"]["name"] == "mpi-operator")
    deployment["metadata"]["namespace"] = "jobs"
    created = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(deployment),
                              check=True).stdout
    template: Doc = json.loads(created)["spec"]["template"]
    return template


def test_upstream_operator_deleted_then_helm_install(cluster: LocalCluster, helm_binary: Path,
                                                      upstream_manifest: Path) -> None:
    """The first path of docs/migration.md, "With Helm": the CRD, upstream's operator objects deleted (the MPIJob
    stays), its Namespace and the CRD adopted, `helm install` without --force-conflicts."""
    job = install_upstream(cluster, upstream_manifest)
    upstream_uid = cluster.rest.get(DEPLOYMENT_PATH)["metadata"]["uid"]
    kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-k", str(CRDS))
    assert kubectl(cluster, "get", "crd", "mpijobs.kubeflow.org", "-o", COLUMNS_CHECK) == OUR_COLUMNS
    kubectl(cluster, "-n", "mpi-operator", "delete", "deployment,serviceaccount", "mpi-operator")
    kubectl(cluster, "delete", "clusterrolebinding,clusterrole", "mpi-operator")
    kubectl(cluster, "delete", "clusterrole", "kubeflow-mpijobs-edit", "kubeflow-mpijobs-view")
    kubectl(cluster, "delete", "clusterrole", "kubeflow-mpijobs-admin")
    remove_recreated_role(cluster)  # the empty one Kubernetes may re-create (docs/operator-guide.md#uninstall)
    assert [o for o in UPSTREAM_OPERATOR if exists(cluster, *o)] == []
    assert cluster.rest.get(JOB_PATH)["metadata"]["uid"] == job["metadata"]["uid"]
    adopt(cluster, KEPT)
    install(helm_binary, cluster)
    assert_ours(cluster, helm_binary, job)
    deployment = cluster.rest.get(DEPLOYMENT_PATH)
    assert deployment["metadata"]["uid"] != upstream_uid
    assert deployment["spec"]["template"] == our_pod_template(cluster, helm_binary)


@pytest.mark.parametrize("how", ["labels", "take-ownership"])
def test_upstream_operator_adopted_by_helm_install(cluster: LocalCluster, helm_binary: Path, upstream_manifest: Path,
                                                  how: str) -> None:
    """The second path: the CRD (deploy/crds/, or the chart's copy of it, files/crds/, for a chart pulled from a
    registry), then every object of upstream's that the chart renders adopted (Helm's label and annotations, or
    Helm 4's `--take-ownership`), `helm install --force-conflicts`: upstream's Deployment becomes ours in place
    (same UID, a rolling update), with exactly our pod template."""
    job = install_upstream(cluster, upstream_manifest)
    upstream_uid = cluster.rest.get(DEPLOYMENT_PATH)["metadata"]["uid"]
    if how == "labels":
        kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-k", str(CRDS))
    else:
        kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-f", str(CHART_CRD))
    if how == "labels":
        adopt(cluster, [*KEPT, *UPSTREAM_OPERATOR])
    install(helm_binary, cluster, "--force-conflicts", *(["--take-ownership"] if how == "take-ownership" else []))
    assert_ours(cluster, helm_binary, job)
    deployment = cluster.rest.get(DEPLOYMENT_PATH)
    assert deployment["metadata"]["uid"] == upstream_uid
    assert deployment["spec"]["template"] == our_pod_template(cluster, helm_binary)


def upstream_crd(manifest: Path) -> Doc:
    crd: Doc = next(d for d in yaml.safe_load_all(manifest.read_text())
                    if d and d["kind"] == "CustomResourceDefinition")
    return crd


def test_without_the_crd_step(cluster: LocalCluster, helm_binary: Path, upstream_manifest: Path) -> None:
    """What docs/migration.md says happens without the CRD step: `helm install` alone is refused on upstream's
    Namespace; adopted without `--force-conflicts`, it is refused with kubectl's conflicts (the CRD's spec.versions
    among them), and the failed release is completed by `helm upgrade --force-conflicts`, which makes the CRD ours."""
    job = install_upstream(cluster, upstream_manifest)
    with pytest.raises(HarnessError, match='Namespace "mpi-operator" in namespace "" exists and cannot be imported '
                                           'into the current release: invalid ownership metadata'):
        install(helm_binary, cluster)
    adopt(cluster, [*KEPT, *UPSTREAM_OPERATOR])
    with pytest.raises(HarnessError) as refused:
        install(helm_binary, cluster)
    message = str(refused.value)
    for conflict in ('CustomResourceDefinition: Apply failed with 1 conflict: conflict with "kubectl": .spec.versions',
                     'ClusterRole: Apply failed with 1 conflict: conflict with "kubectl": .rules',
                     'Deployment: Apply failed with 2 conflicts: conflicts with "kubectl":\n'
                     '- .spec.template.spec.containers[name="mpi-operator"].args\n'
                     '- .spec.template.spec.containers[name="mpi-operator"].image'):
        assert conflict in message, message
    assert kubectl(cluster, "get", "crd", "mpijobs.kubeflow.org", "-o", COLUMNS_CHECK) == ""
    assert helm(helm_binary, "list", f"--namespace={RELEASE_NAMESPACE}", "--failed", "--short",
                kubeconfig=cluster.kubeconfig).split() == [RELEASE]
    helm(helm_binary, "upgrade", RELEASE, str(CHART), f"--namespace={RELEASE_NAMESPACE}", *value_flags(VALUES),
         "--force-conflicts", kubeconfig=cluster.kubeconfig)
    assert_ours(cluster, helm_binary, job)


def test_crds_disabled_without_the_crd_step_keeps_upstreams(cluster: LocalCluster, helm_binary: Path,
                                                            upstream_manifest: Path) -> None:
    """With `crds.enabled=false` and no CRD step, `helm install` succeeds and upstream's CRD stays, silently: the
    documented check prints no printer column, and the API server prunes status.readyWorkers from the MPIJob."""
    job = install_upstream(cluster, upstream_manifest)
    kubectl(cluster, "-n", "mpi-operator", "delete", "deployment,serviceaccount", "mpi-operator")
    kubectl(cluster, "delete", "clusterrolebinding,clusterrole", "mpi-operator")
    kubectl(cluster, "delete", "clusterrole", "kubeflow-mpijobs-edit", "kubeflow-mpijobs-view")
    kubectl(cluster, "delete", "clusterrole", "kubeflow-mpijobs-admin")
    remove_recreated_role(cluster)  # the empty one Kubernetes may re-create (docs/operator-guide.md#uninstall)
    adopt(cluster, KEPT[:1])
    install(helm_binary, cluster, "--set=crds.enabled=false")
    stored = cluster.rest.get(CRD_PATH)
    assert stored["spec"]["versions"] == upstream_crd(upstream_manifest)["spec"]["versions"]
    assert kubectl(cluster, "get", "crd", "mpijobs.kubeflow.org", "-o", COLUMNS_CHECK) == ""
    patch = json.dumps({"status": {"readyWorkers": 2, "startTime": "2026-12-06T00:00:00Z"}})
    kubectl(cluster, "-n", "jobs", "patch", "mpijob", "pi", "--subresource=status", "--type=merge", "-p", patch)
    assert cluster.rest.get(JOB_PATH)["status"] == {"startTime": "2026-12-06T00:00:00Z"}
    kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-k", str(CRDS))
    assert kubectl(cluster, "get", "crd", "mpijobs.kubeflow.org", "-o", COLUMNS_CHECK) == OUR_COLUMNS
    assert cluster.rest.get(JOB_PATH)["metadata"]["uid"] == job["metadata"]["uid"]


def newer_chart(out: Path, column: str) -> Path:
    """This chart with one more printer column in its CRD: a later chart version's CRD."""
    chart = out / "mpi-operator"
    shutil.copytree(CHART, chart)
    path = chart / "files" / "crds" / "kubeflow.org_mpijobs.yaml"
    crd = yaml.safe_load(path.read_text())
    crd["spec"]["versions"][0]["additionalPrinterColumns"].append(
        {"name": column, "type": "string", "jsonPath": ".spec.mpiImplementation", "priority": 1})
    path.write_text(yaml.safe_dump(crd))
    return chart


def columns(cluster: LocalCluster) -> list[str]:
    return kubectl(cluster, "get", "crd", "mpijobs.kubeflow.org", "-o", COLUMNS_CHECK).split()


def test_a_newer_crd_over_the_release(cluster: LocalCluster, helm_binary: Path, tmp_path: Path) -> None:
    """Chart upgrades: a newer chart's CRD reaches the cluster by `helm upgrade --reset-then-reuse-values` alone. A
    newer CRD applied with kubectl over the release's is refused with a conflict with "helm" until
    `--force-conflicts`; the next `helm upgrade` of a CRD that differs is then refused with a conflict with
    "kubectl" until `--force-conflicts` in turn."""
    install(helm_binary, cluster)
    assert columns(cluster) == OUR_COLUMNS.split()
    upgrade = ["upgrade", RELEASE, f"--namespace={RELEASE_NAMESPACE}", "--reset-then-reuse-values"]
    helm(helm_binary, *upgrade[:2], str(newer_chart(tmp_path / "a", "Chart-Column")), *upgrade[2:],
         kubeconfig=cluster.kubeconfig)
    assert columns(cluster) == [*OUR_COLUMNS.split(), "Chart-Column"]

    crd = yaml.safe_load((newer_chart(tmp_path / "b", "Kubectl-Column") / "files" / "crds" /
                          "kubeflow.org_mpijobs.yaml").read_text())
    path = tmp_path / "newer-crd.yaml"
    path.write_text(yaml.safe_dump(crd))
    refused = cluster.kubectl("apply", "--server-side", "-f", str(path))
    assert refused.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "helm": .spec.versions' in refused.stderr, refused.stderr
    kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-f", str(path))
    assert columns(cluster) == [*OUR_COLUMNS.split(), "Kubectl-Column"]

    chart = newer_chart(tmp_path / "c", "Later-Column")
    with pytest.raises(HarnessError, match=re.escape('conflict with "kubectl": .spec.versions')):
        helm(helm_binary, *upgrade[:2], str(chart), *upgrade[2:], kubeconfig=cluster.kubeconfig)
    helm(helm_binary, *upgrade[:2], str(chart), *upgrade[2:], "--force-conflicts", kubeconfig=cluster.kubeconfig)
    assert columns(cluster) == [*OUR_COLUMNS.split(), "Later-Column"]


def test_uninstalling_a_failed_adoption_deletes_the_namespace(cluster: LocalCluster, helm_binary: Path,
                                                              upstream_manifest: Path) -> None:
    """Why docs/migration.md says to complete a refused install with `helm upgrade` rather than `helm uninstall`
    it: the failed release's uninstall deletes what it took over, upstream's Namespace (with the Lease) and
    Deployment among them; the CRD stays (the chart's keep policy), and with it the MPIJob."""
    job = install_upstream(cluster, upstream_manifest)
    adopt(cluster, [*KEPT, *UPSTREAM_OPERATOR])
    with pytest.raises(HarnessError, match=re.escape('conflict with "kubectl"')):
        install(helm_binary, cluster)
    helm(helm_binary, "uninstall", RELEASE, f"--namespace={RELEASE_NAMESPACE}", kubeconfig=cluster.kubeconfig)
    wait_for(lambda: not exists(cluster, "namespace", "", "mpi-operator"), timeout=120,
             what="the namespace mpi-operator deleted")
    remove_recreated_role(cluster)
    assert [o for o in UPSTREAM_OPERATOR if exists(cluster, *o)] == []
    assert cluster.rest.get(JOB_PATH)["metadata"]["uid"] == job["metadata"]["uid"]
