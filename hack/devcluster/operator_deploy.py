"""Deploy our operator as a cluster admin would, on a real-node cluster: `kubectl apply --server-side -k`
of an overlay of `deploy/` with the built-in certificate path (deploy/certs/README.md, section 2).

The images are `mpijob-operator/{webhook,reconciler}:dev`, built from Dockerfile.webhook and
Dockerfile.reconciler by hack/build/build-operator-images.sh and imported into the node (IfNotPresent).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from .binaries import REPO_ROOT
from .cluster import LocalCluster
from .rest import ApiError
from .wait import HarnessError, wait_for

BUILD_SCRIPT = REPO_ROOT / "hack" / "build" / "build-operator-images.sh"
NAMESPACE = "mpi-operator"
WEBHOOK = "mpijob-webhook"
CRD_NAME = "mpijobs.kubeflow.org"
RECONCILER = "mpi-operator"  # upstream's Deployment name (deploy/reconciler, docs/migration.md)
TLS_SECRET = "mpijob-webhook-tls"
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
    found = [sorted(out.glob(f"operator-{c}-*.tar"))[-1:] for c in ("webhook", "reconciler")]
    if not all(found):
        raise HarnessError(f"{BUILD_SCRIPT.name} left no operator images in {out}")
    return [f[0] for f in found]


def _overlay(directory: Path, ca_bundle: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    deploy = Path(os.path.relpath(REPO_ROOT / "deploy", directory))
    kustomization: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [str(deploy / "rbac"), str(deploy / "webhook"), str(deploy / "reconciler")],
        "patches": [{"target": {"group": "admissionregistration.k8s.io", "name": WEBHOOK}, "patch": yaml.safe_dump([
            {"op": "remove", "path": "/metadata/annotations/cert-manager.io~1inject-ca-from"},
            *({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": ca_bundle}
              for i in range(_webhook_count()))])}],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return directory


def _webhook_count() -> int:
    """Webhooks per configuration in deploy/webhook (the patch fills each one's caBundle)."""
    docs = [yaml.safe_load(p.read_text()) for p in (REPO_ROOT / "deploy" / "webhook").glob("*-configuration.yaml")]
    counts = {len(d["webhooks"]) for d in docs}
    if len(counts) != 1:
        raise HarnessError("the webhook configurations in deploy/webhook differ in their number of webhooks")
    return counts.pop()


def deploy(cluster: LocalCluster, work_dir: Path, timeout: float = 180) -> dict[str, float]:
    """Apply the overlay, create the TLS Secret, and wait until the webhook is Ready behind its Service
    and called by the API server, and the reconciler holds its Lease. Returns the seconds of each step."""
    import time  # noqa: PLC0415

    timings: dict[str, float] = {}
    began = time.monotonic()
    certs = work_dir / "webhook-certs"
    subprocess.run([sys.executable, "-m", "webhook.certs", "--out-dir", str(certs)], check=True,
                   capture_output=True, cwd=REPO_ROOT)
    ca_bundle = (certs / "ca-bundle.b64").read_text().strip()
    overlay = _overlay(work_dir / "overlay", ca_bundle)
    result = cluster.kubectl("apply", "--server-side", "-k", str(overlay), timeout=120)
    if result.returncode != 0:
        raise HarnessError(f"kubectl apply --server-side -k failed:\n{result.stderr}")
    patch_crd_ca_bundle(cluster, ca_bundle)
    cluster.kubectl("-n", NAMESPACE, "create", "secret", "generic", TLS_SECRET, "--type=kubernetes.io/tls",
                    f"--from-file=tls.crt={certs / 'tls.crt'}", f"--from-file=tls.key={certs / 'tls.key'}",
                    f"--from-file=ca.crt={certs / 'ca.crt'}", check=True)
    timings["apply"] = time.monotonic() - began

    def available(name: str) -> bool:
        try:
            dep = cluster.rest.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}")
        except ApiError:
            return False
        status = dep.get("status") or {}
        return bool(status.get("availableReplicas", 0) >= dep["spec"].get("replicas", 1))

    def diagnostics() -> str:
        return (cluster.kubectl("-n", NAMESPACE, "get", "pods,events", "-o", "wide").stdout + "\n" +
                cluster.kubectl("-n", NAMESPACE, "logs", "-l", "app.kubernetes.io/part-of=mpijob-operator",
                                "--tail=20", "--prefix").stdout)

    try:
        wait_for(lambda: available(WEBHOOK), timeout, 0.5, what="the webhook Deployment available")
        timings["webhook-ready"] = time.monotonic() - began
        wait_for(lambda: _canary_denied(cluster), timeout, 0.5, what="the API server calling the webhook pods")
        timings["webhook-called"] = time.monotonic() - began
        wait_for(lambda: available(RECONCILER), timeout, 0.5, what="the reconciler Deployment available")
        wait_for(lambda: bool(lease_holder(cluster)), timeout, 0.5, what="the reconciler holding its Lease")
        timings["reconciler-leader"] = time.monotonic() - began
    except HarnessError as err:
        raise HarnessError(f"{err}\n{diagnostics()}") from None
    return timings


def patch_crd_ca_bundle(cluster: LocalCluster, ca_bundle: str) -> None:
    """The built-in certificates' path for the CRD's conversion webhook (deploy/certs/README.md): drop the
    cert-manager annotation, set the caBundle of spec.conversion.webhook.clientConfig."""
    cluster.kubectl("annotate", "crd", CRD_NAME, "cert-manager.io/inject-ca-from-", check=True)
    cluster.kubectl("patch", "crd", CRD_NAME, "--type=json", "-p", json.dumps([
        {"op": "add", "path": "/spec/conversion/webhook/clientConfig/caBundle", "value": ca_bundle}]), check=True)


def webhook_ca_bundle(cluster: LocalCluster) -> str:
    """The caBundle `deploy` patched into the validating webhook configuration."""
    config = cluster.rest.get(f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{WEBHOOK}")
    return str(config["webhooks"][0]["clientConfig"]["caBundle"])


def reapply(cluster: LocalCluster, work_dir: Path, ca_bundle: str, timeout: float = 180) -> None:
    """Apply our CRD and the overlay of `deploy` again, server-side with --force-conflicts (e.g. over
    upstream's manifests; its TLS Secret is left as it is), and wait until the API server calls the
    webhook and the reconciler Deployment is available."""
    crd = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
    for what in (["-f", str(crd)], ["-k", str(_overlay(work_dir / "overlay", ca_bundle))]):
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
