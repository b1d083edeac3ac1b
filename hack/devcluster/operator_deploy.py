"""Deploy our operator as a cluster admin would, on a real-node cluster, and remove it again keeping the jobs.

- deploy: `kubectl apply --server-side -k deploy/crds/` (the CRD, its own first step), then `kubectl apply
  --server-side -k` of an overlay of `deploy/` with the manual certificate path (deploy/certs/README.md,
  section 2); remove: the operator's removal of docs/operator-guide.md#uninstall, `kubectl delete -k` of the
  same overlay, the webhook configurations first. The CRD stays, and with it every MPIJob and its pods.
- helm_install, helm_upgrade, helm_uninstall: the same operator as the Helm release `mpi-operator` of
  deploy/chart/mpi-operator (docs/operator-guide.md#with-helm), manual certificates; a CRD there already (applied
  with kubectl) is adopted by the release first, as the guide says; `helm uninstall` leaves the CRD too (the
  chart's crds.keep, Helm's keep policy).

The images are `mpijob-operator/{webhook,reconciler}:dev`, built from Dockerfile.webhook and
Dockerfile.reconciler by hack/build/build-operator-images.sh and imported into the node (IfNotPresent).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from . import api_v2
from .binaries import REPO_ROOT
from .cluster import LocalCluster
from .helm import CHART, RELEASE, RELEASE_NAMESPACE, helm, release_objects, value_flags
from .rest import ApiError
from .wait import HarnessError, wait_for

BUILD_SCRIPT = REPO_ROOT / "hack" / "build" / "build-operator-images.sh"
NAMESPACE = "mpi-operator"
WEBHOOK = "mpijob-webhook"
CRD_NAME = "mpijobs.kubeflow.org"
RECONCILER = "mpi-operator"  # upstream's Deployment name (deploy/reconciler, docs/migration.md)
TLS_SECRET = "mpijob-webhook-tls"
CRDS = REPO_ROOT / "deploy" / "crds"  # a kustomization of its own: applied first, never deleted with the operator
PART_OF = "app.kubernetes.io/part-of=mpijob-operator"  # deploy/kustomization.yaml's label, the chart's too
ADMISSION_CONFIGURATION = "app.kubernetes.io/component=admission-configuration"  # the two webhook configurations
# The images as hack/build/build-operator-images.sh tags them and the node has them imported: the chart's values.
# They are the chart's placeholders, which it takes only with imagePullPolicy Never (imported, never pulled).
HELM_IMAGES = {"webhook.image.repository": "mpijob-operator/webhook", "webhook.image.tag": "dev",
               "reconciler.image.repository": "mpijob-operator/reconciler", "reconciler.image.tag": "dev",
               "webhook.imagePullPolicy": "Never", "reconciler.imagePullPolicy": "Never"}
# Every kind the operator's manifests hold (deploy/ and deploy/crds/, the chart's templates and crds/).
OPERATOR_RESOURCES = ("customresourcedefinitions", "namespaces", "clusterroles", "clusterrolebindings",
                      "priorityclasses", "mutatingwebhookconfigurations", "validatingwebhookconfigurations",
                      "serviceaccounts", "roles", "rolebindings", "services", "deployments", "poddisruptionbudgets",
                      "secrets", "configmaps")
Key = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name
AGGREGATED_ROLE = "kubeflow-mpijobs-admin"  # deploy/rbac/user-roles.yaml: the one ClusterRole with an aggregationRule
CANARY = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "webhook-canary"},
          "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 2, "template": {"spec": {"containers": [
              {"name": "c", "image": "i"}]}}}}}}


def operator_image_archives() -> list[Path]:
    """The webhook and reconciler docker-archives (built once, cached)."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                          check=False)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise HarnessError(f"{BUILD_SCRIPT.name} failed with status {proc.returncode} (see its output above)")
    out = Path(lines[-1])
    # the host's operator-<component>-<key>.tar, not another architecture's operator-<component>-arm64-<key>.tar
    found = [sorted(p for p in out.glob(f"operator-{c}-*.tar")
                    if re.fullmatch(rf"operator-{c}-[0-9a-f]{{12}}\.tar", p.name))[-1:]
             for c in ("webhook", "reconciler")]
    if not all(found):
        raise HarnessError(f"{BUILD_SCRIPT.name} left no operator images in {out}")
    return [f[0] for f in found]


def _overlay(directory: Path, ca_bundle: str) -> Path:
    """deploy/ with the manual certificates: its cert-manager objects (deploy/certs) left out, the webhook
    configurations given CA_BUNDLE instead of cert-manager's annotation. `kubectl delete -k` of it is
    `kubectl delete -k deploy/` without cert-manager: the CRD is not in it (deploy/crds/ is applied apart)."""
    directory.mkdir(parents=True, exist_ok=True)
    deploy = Path(os.path.relpath(REPO_ROOT / "deploy", directory))
    without_cert_manager = {"$patch": "delete", "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
                            "metadata": {"name": "any"}}  # kind and name: those of each object the target matches
    kustomization: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [str(deploy)],
        "patches": [
            {"target": {"group": "cert-manager.io"}, "patch": yaml.safe_dump(without_cert_manager)},
            *({"target": {"group": "admissionregistration.k8s.io", "kind": kind, "name": WEBHOOK},
               "patch": yaml.safe_dump([
                   {"op": "remove", "path": "/metadata/annotations/cert-manager.io~1inject-ca-from"},
                   *({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": ca_bundle}
                     for i in range(count))])}
              for kind, count in _webhook_counts().items())],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return directory


def _webhook_counts() -> dict[str, int]:
    """Webhooks per configuration kind in deploy/webhook (the patch fills each one's caBundle)."""
    docs = [yaml.safe_load(p.read_text()) for p in (REPO_ROOT / "deploy" / "webhook").glob("*-configuration.yaml")]
    return {d["kind"]: len(d["webhooks"]) for d in docs}


def certificates(directory: Path) -> Path:
    """The manual certificates of `python -m webhook.certs` in DIRECTORY, written there unless they are
    already (an admin keeps them: a reinstall uses the same CA)."""
    if not (directory / "ca-bundle.b64").is_file():
        subprocess.run([sys.executable, "-m", "webhook.certs", "--out-dir", str(directory)], check=True,
                       capture_output=True, cwd=REPO_ROOT)
    return directory


def apply_crd(cluster: LocalCluster, timeout: float = 60) -> None:
    """The first step of an install and of an upgrade: `kubectl apply --server-side -k deploy/crds/`, until the
    CRD is Established."""
    result = cluster.kubectl("apply", "--server-side", "-k", str(CRDS), timeout=timeout)
    if result.returncode != 0:
        raise HarnessError(f"kubectl apply --server-side -k deploy/crds/ failed:\n{result.stderr}")

    def established() -> bool:
        crd = cluster.rest.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])

    wait_for(established, timeout, 0.2, what=f"the CRD {CRD_NAME} Established")


def deploy(cluster: LocalCluster, work_dir: Path, timeout: float = 180) -> dict[str, float]:
    """Apply the CRD, then the overlay, create the TLS Secret, and wait until the webhook is Ready behind its
    Service and called by the API server, and the reconciler holds its Lease. Returns the seconds of each step."""
    began = time.monotonic()
    certs = certificates(work_dir / "webhook-certs")
    ca_bundle = (certs / "ca-bundle.b64").read_text().strip()
    apply_crd(cluster)
    overlay = _overlay(work_dir / "overlay", ca_bundle)
    result = cluster.kubectl("apply", "--server-side", "-k", str(overlay), timeout=120)
    if result.returncode != 0:
        raise HarnessError(f"kubectl apply --server-side -k failed:\n{result.stderr}")
    patch_crd_ca_bundle(cluster, ca_bundle)
    cluster.kubectl("-n", NAMESPACE, "create", "secret", "generic", TLS_SECRET, "--type=kubernetes.io/tls",
                    f"--from-file=tls.crt={certs / 'tls.crt'}", f"--from-file=tls.key={certs / 'tls.key'}",
                    f"--from-file=ca.crt={certs / 'ca.crt'}", check=True)
    timings = {"apply": time.monotonic() - began}
    return {**timings, **wait_ready(cluster, timeout, began)}


def wait_ready(cluster: LocalCluster, timeout: float = 180, began: float | None = None) -> dict[str, float]:
    """Until the webhook Deployment is available and the API server calls it (the canary MPIJob denied), and
    the reconciler Deployment is available and holds its Lease; the seconds since BEGAN at each step."""
    began = time.monotonic() if began is None else began
    timings: dict[str, float] = {}

    def available(name: str) -> bool:
        try:
            dep = cluster.rest.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}")
        except ApiError:
            return False
        status = dep.get("status") or {}
        return bool(status.get("availableReplicas", 0) >= dep["spec"].get("replicas", 1))

    try:
        wait_for(lambda: available(WEBHOOK), timeout, 0.5, what="the webhook Deployment available")
        timings["webhook-ready"] = time.monotonic() - began
        wait_for(lambda: _canary_denied(cluster), timeout, 0.5, what="the API server calling the webhook pods")
        timings["webhook-called"] = time.monotonic() - began
        wait_for(lambda: available(RECONCILER), timeout, 0.5, what="the reconciler Deployment available")
        wait_for(lambda: bool(lease_holder(cluster)), timeout, 0.5, what="the reconciler holding its Lease")
        timings["reconciler-leader"] = time.monotonic() - began
    except HarnessError as err:
        raise HarnessError(f"{err}\n{diagnostics(cluster)}") from None
    return timings


def diagnostics(cluster: LocalCluster) -> str:
    """The operator's pods, events and last log lines."""
    return (cluster.kubectl("-n", NAMESPACE, "get", "pods,events", "-o", "wide").stdout + "\n" +
            cluster.kubectl("-n", NAMESPACE, "logs", "-l", "app.kubernetes.io/name in (mpijob-webhook,mpi-operator)",
                            "--tail=20", "--prefix").stdout)


def remove(cluster: LocalCluster, work_dir: Path, timeout: float = 180) -> bool:
    """Remove the operator that `deploy` applied, as docs/operator-guide.md#uninstall says: `kubectl delete -k`
    of the same overlay, the webhook configurations first (no MPIJob write then waits for a webhook on its way
    out), then the ClusterRole Kubernetes may have re-created (remove_recreated_role, whose answer it returns).
    The CRD stays, and with it every MPIJob and its pods. Returns once the namespace is gone."""
    try:
        ca_bundle = webhook_ca_bundle(cluster)
    except ApiError:
        ca_bundle = ""  # the configurations are gone already; a deletion does not read it
    overlay = _overlay(work_dir / "overlay", ca_bundle)
    for flags in (["-l", ADMISSION_CONFIGURATION], ["--ignore-not-found"]):
        result = cluster.kubectl("delete", "-k", str(overlay), *flags, f"--timeout={int(timeout)}s",
                                 timeout=timeout + 10)
        if result.returncode != 0:
            raise HarnessError(f"kubectl delete -k {' '.join(flags)} failed:\n{result.stderr}")
    wait_removed(cluster, timeout)
    return remove_recreated_role(cluster)


def purge(cluster: LocalCluster, work_dir: Path, timeout: float = 180) -> None:
    """The full removal of docs/operator-guide.md#uninstall, which deletes every MPIJob on purpose: the MPIJobs
    first, while the operator still serves their conversions (the garbage collector deletes what they own),
    then the operator (`remove`), then the CRD last (`kubectl delete -k deploy/crds/`)."""
    def delete(*args: str) -> None:
        result = cluster.kubectl("delete", *args, f"--timeout={int(timeout)}s", timeout=timeout + 10)
        if result.returncode != 0:
            raise HarnessError(f"kubectl delete {' '.join(args)} failed:\n{result.stderr}")

    delete("mpijobs.v2beta1.kubeflow.org", "--all", "--all-namespaces")
    remove(cluster, work_dir, timeout)
    delete("-k", str(CRDS))


def remove_recreated_role(cluster: LocalCluster) -> bool:
    """Delete the empty ClusterRole kubeflow-mpijobs-admin that kube-controller-manager's ClusterRole aggregation
    controller re-creates, now and then, when it is deleted together with the role it aggregates (edit): seeing
    the edit role go, the controller force-applies the aggregated role's new rules from its cache, and a server-side
    apply of an object deleted meanwhile creates it, without labels, aggregationRule or rules. It grants nothing,
    but `helm install` refuses to adopt it. True when there was one (docs/operator-guide.md#uninstall). Raises
    HarnessError when the role there is anything else."""
    try:
        role = cluster.rest.get(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{AGGREGATED_ROLE}")
    except ApiError as err:
        if err.status == 404:
            return False
        raise
    if role.get("aggregationRule") or role.get("rules") or role["metadata"].get("labels"):
        raise HarnessError(f"the operator removed, ClusterRole {AGGREGATED_ROLE} is still there: {role}")
    cluster.kubectl("delete", "clusterrole", AGGREGATED_ROLE, "--ignore-not-found", check=True)
    return True


def wait_removed(cluster: LocalCluster, timeout: float = 180) -> None:
    """Until the operator's namespace is gone (the namespace controller deletes what it held) and no object of
    the operator is left but the CRD."""
    crd = {("CustomResourceDefinition", "", CRD_NAME)}
    wait_for(lambda: operator_objects(cluster) <= crd, timeout, 0.5,
             what="the operator's objects, its namespace included, deleted (all but the CRD)")


def operator_objects(cluster: LocalCluster, resources: Iterable[str] = OPERATOR_RESOURCES) -> set[Key]:
    """The operator's objects on the cluster: every object of RESOURCES labelled part-of=mpijob-operator, in any
    namespace, and the namespace mpi-operator whatever its labels (with what it holds)."""
    result = cluster.kubectl("get", ",".join(resources), "--all-namespaces", "-l", PART_OF, "-o", "json")
    if result.returncode != 0:
        raise HarnessError(f"kubectl get -l {PART_OF} failed:\n{result.stderr}")
    found = {key(doc) for doc in json.loads(result.stdout)["items"]}
    try:
        cluster.rest.get(f"/api/v1/namespaces/{NAMESPACE}")
    except ApiError:
        return found
    return found | {("Namespace", "", NAMESPACE)}


def key(doc: Mapping[str, Any]) -> Key:
    """An object's kind, namespace ("" when cluster-scoped) and name."""
    return str(doc["kind"]), str(doc["metadata"].get("namespace", "")), str(doc["metadata"]["name"])


def exists(cluster: LocalCluster, doc: Mapping[str, Any]) -> bool:
    """Whether the API server has DOC's object (by apiVersion, kind, namespace and name)."""
    group = str(doc["apiVersion"]).rpartition("/")[0]
    namespace = doc["metadata"].get("namespace")
    resource = f"{str(doc['kind']).lower()}{'.' + group if group else ''}/{doc['metadata']['name']}"
    result = cluster.kubectl("get", resource, "-o", "name", *([f"--namespace={namespace}"] if namespace else []))
    if result.returncode != 0 and "NotFound" not in result.stderr:
        raise HarnessError(f"kubectl get {resource} failed:\n{result.stderr}")
    return result.returncode == 0


def helm_flags(certs: Path, values: Mapping[str, str] | None = None) -> list[str]:
    """`helm install`'s value flags for the images as imported, the manual certificates in CERTS, and VALUES."""
    files = {"certificates.manual.caBundle": certs / "ca-bundle.b64", "certificates.manual.tlsCrt": certs / "tls.crt",
             "certificates.manual.tlsKey": certs / "tls.key"}
    return value_flags({**HELM_IMAGES, "certificates.mode": "manual", **(values or {})}, files=files)


def helm_install(cluster: LocalCluster, binary: Path, work_dir: Path, values: Mapping[str, str] | None = None,
                 timeout: float = 180) -> dict[str, float]:
    """`helm install mpi-operator deploy/chart/mpi-operator` as docs/operator-guide.md#with-helm gives it, with
    the manual certificates (in WORK_DIR/webhook-certs, made once and kept for a reinstall), a CRD there already
    adopted first (adopt_crd); then the waits of `deploy`. Returns the seconds of each step."""
    began = time.monotonic()
    certs = certificates(work_dir / "webhook-certs")
    adopt_crd(cluster)
    helm(binary, "install", RELEASE, str(CHART), f"--namespace={RELEASE_NAMESPACE}", *helm_flags(certs, values),
         kubeconfig=cluster.kubeconfig)
    return {"install": time.monotonic() - began, **wait_ready(cluster, timeout, began)}


def adopt_crd(cluster: LocalCluster, release: str = RELEASE, namespace: str = RELEASE_NAMESPACE) -> bool:
    """docs/operator-guide.md#with-helm: a CRD applied before (kubectl apply -k deploy/crds/, an earlier chart's
    crds/, upstream's) gets Helm's ownership label and annotations, so that the release adopts it instead of
    failing with "invalid ownership metadata". Whether there was a CRD to adopt."""
    try:
        cluster.rest.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")
    except ApiError as err:
        if err.status == 404:
            return False
        raise
    cluster.kubectl("label", "--overwrite", "crd", CRD_NAME, "app.kubernetes.io/managed-by=Helm", check=True)
    cluster.kubectl("annotate", "--overwrite", "crd", CRD_NAME, f"meta.helm.sh/release-name={release}",
                    f"meta.helm.sh/release-namespace={namespace}", check=True)
    return True


def helm_upgrade(cluster: LocalCluster, binary: Path, values: Mapping[str, str]) -> None:
    """`helm upgrade --reuse-values` with VALUES changed (the Deployments roll as Helm updates them)."""
    helm(binary, "upgrade", RELEASE, str(CHART), f"--namespace={RELEASE_NAMESPACE}", "--reuse-values",
         *value_flags(values), kubeconfig=cluster.kubeconfig)


def helm_uninstall(cluster: LocalCluster, binary: Path, timeout: float = 180, *, clean_up: bool = True) -> bool:
    """`helm uninstall mpi-operator`, until the namespace is gone and nothing of the operator is left but the CRD
    (which the chart's keep policy leaves); then, with CLEAN_UP, the ClusterRole Kubernetes may have re-created
    (remove_recreated_role, whose answer it returns), as docs/operator-guide.md#uninstall says. Not `helm uninstall
    --wait`: it fails ("resource ClusterRole//kubeflow-mpijobs-admin still exists") when that role is re-created."""
    helm(binary, "uninstall", RELEASE, f"--namespace={RELEASE_NAMESPACE}", kubeconfig=cluster.kubeconfig)
    wait_removed(cluster, timeout)
    return remove_recreated_role(cluster) if clean_up else False


def helm_release(cluster: LocalCluster, binary: Path) -> list[dict[str, Any]]:
    """The objects of the installed release (`helm get manifest`)."""
    return release_objects(binary, cluster.kubeconfig)


def patch_crd_ca_bundle(cluster: LocalCluster, ca_bundle: str) -> bool:
    """The manual certificates' path for the CRD's conversion webhook (deploy/certs/README.md), when kubeflow.org/v2
    is on: drop the cert-manager annotation, set the caBundle of spec.conversion.webhook.clientConfig. The default CRD
    has no conversion webhook: nothing to do then. Whether there was one."""
    if api_v2.conversion_strategy(cluster) != "Webhook":
        return False
    cluster.kubectl("annotate", "crd", CRD_NAME, "cert-manager.io/inject-ca-from-", check=True)
    cluster.kubectl("patch", "crd", CRD_NAME, "--type=json", "-p", json.dumps([
        {"op": "add", "path": "/spec/conversion/webhook/clientConfig/caBundle", "value": ca_bundle}]), check=True)
    return True


def enable_api_v2(cluster: LocalCluster, timeout: float = 60) -> None:
    """Turn kubeflow.org/v2 on for the deployed operator as docs/operator-guide.md says with the manual
    certificates: `kubectl apply --server-side --force-conflicts -k deploy/crds-v2/`, the conversion caBundle patched
    (the one of the admission webhooks), until a list through v2 succeeds (the API server converts through the
    webhook pods)."""
    api_v2.enable(cluster, timeout)
    patch_crd_ca_bundle(cluster, webhook_ca_bundle(cluster))
    wait_for(lambda: cluster.kubectl("get", "mpijobs.v2.kubeflow.org", "--all-namespaces").returncode == 0,
             timeout, 0.5, what="kubeflow.org/v2 reads converted by the webhook pods")


def webhook_ca_bundle(cluster: LocalCluster) -> str:
    """The caBundle `deploy` patched into the validating webhook configuration."""
    config = cluster.rest.get(f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{WEBHOOK}")
    return str(config["webhooks"][0]["clientConfig"]["caBundle"])


def reapply(cluster: LocalCluster, work_dir: Path, ca_bundle: str, timeout: float = 180) -> None:
    """Apply our CRD and the overlay of `deploy` again, server-side with --force-conflicts (e.g. over
    upstream's manifests; its TLS Secret is left as it is), and wait until the API server calls the
    webhook and the reconciler Deployment is available."""
    for what in (["-k", str(CRDS)], ["-k", str(_overlay(work_dir / "overlay", ca_bundle))]):
        result = cluster.kubectl("apply", "--server-side", "--force-conflicts", *what, timeout=120)
        if result.returncode != 0:
            raise HarnessError(f"kubectl apply --server-side {' '.join(what)} failed:\n{result.stderr}")
    patch_crd_ca_bundle(cluster, ca_bundle)
    wait_for(lambda: _canary_denied(cluster), timeout, 0.5, what="the API server calling the webhook pods")


def lease_holder(cluster: LocalCluster) -> str:
    leases = cluster.rest.get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases").get("items", [])
    return next((str(lease["spec"].get("holderIdentity") or "") for lease in leases
                 if lease["spec"].get("holderIdentity")), "")


def _canary_denied(cluster: LocalCluster) -> bool:
    result = cluster.kubectl("create", "--dry-run=server", "-n", "default", "-o", "yaml", "-f", "-",
                             input=yaml.safe_dump(CANARY))
    return 'MPIJob "webhook-canary" is invalid' in result.stderr and "must be 1" in result.stderr
