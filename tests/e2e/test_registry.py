"""The operator's images through a real registry, the path an admin follows (README, docs/operator-guide.md).

A local registry (Debian's docker-registry, a host process on 127.0.0.1, plain HTTP) stands for the admin's:
`make images REGISTRY=<it>/mpijob TAG=<fresh> INSECURE=1` builds both images and pushes them there, the real
node's containerd is configured for that registry (a hosts.toml, RealNodeCluster.registry_configured), and the
operator is deployed with the kustomization the target printed (its `images:`; the resources are the package's
overlay of deploy/ with the manual certificates). The operator's pods then run images pulled from the
registry: their imageIDs are the pushed digests and the registry's access log shows containerd fetching the
manifests; the webhook admits and the reconciler runs a job. The package's operator (the imported
`mpijob-operator/*:dev` images) is put back afterwards, however the test ends.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.devcluster.binaries import REPO_ROOT
from hack.devcluster.operator_deploy import (
    NAMESPACE,
    RECONCILER,
    WEBHOOK,
    _overlay,
    lease_holder,
    reapply,
    wait_ready,
    webhook_ca_bundle,
)
from hack.devcluster.realnode import RealNodeCluster
from hack.devcluster.registry import ADDRESS, LocalRegistry
from hack.devcluster.wait import wait_for
from tests.e2e.jobs import assert_pi, run_to_success, upstream_pi

PATH = "mpijob"  # REGISTRY=<host:port>/mpijob
DEPLOYMENTS = {WEBHOOK: "webhook", RECONCILER: "reconciler"}  # Deployment: its image's component


def push(registry: LocalRegistry, tag: str) -> str:
    """`make images` as an admin runs it; its stdout."""
    result = subprocess.run(["make", "-s", "images", f"REGISTRY={registry.host}/{PATH}", f"TAG={tag}", "INSECURE=1"],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True, timeout=540, check=False)
    assert result.returncode == 0, result.stdout
    return result.stdout


def printed_references(output: str) -> dict[str, str]:
    """The `webhook=<ref>@<digest>` and `reconciler=...` lines that end the target's output."""
    pairs = [line.split("=", 1) for line in output.splitlines() if line.startswith(("webhook=", "reconciler="))]
    return dict(pairs)


def printed_kustomization(output: str) -> dict[str, Any]:
    """The kustomization.yaml the target printed (the indented block after its `kustomize:` lines)."""
    lines = output.split("\nkustomize:", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  apiVersion:"))
    end = lines.index("", start)
    document: dict[str, Any] = yaml.safe_load(textwrap.dedent("\n".join(lines[start:end])))
    return document


def operator_pods(cluster: RealNodeCluster, deployment: str) -> list[dict[str, Any]]:
    pods = cluster.rest.get(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app.kubernetes.io/name={deployment}")
    return [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]


def rolled_out(cluster: RealNodeCluster, images: dict[str, str]) -> bool:
    """Every operator pod runs, Ready, the image wanted for its Deployment, no other pod is left, and the
    reconciler that runs it holds the Lease."""
    for deployment, image in images.items():
        dep = cluster.rest.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{deployment}")
        status = dep.get("status") or {}
        pods = operator_pods(cluster, deployment)
        wanted = dep["spec"].get("replicas", 1)
        if not (status.get("observedGeneration") == dep["metadata"]["generation"]
                and status.get("updatedReplicas") == status.get("availableReplicas") == wanted == len(pods)):
            return False
        if any(p["spec"]["containers"][0]["image"] != image or not (p.get("status") or {}).get("containerStatuses")
               or not p["status"]["containerStatuses"][0].get("ready") for p in pods):
            return False
    holder = lease_holder(cluster)
    return any(holder.startswith(p["metadata"]["name"]) for p in operator_pods(cluster, RECONCILER))


def wait_rolled_out(cluster: RealNodeCluster, images: dict[str, str]) -> None:
    wait_for(lambda: rolled_out(cluster, images), 300, 1, what=f"the operator rolled out with {images}")
    wait_ready(cluster)


def printed_overlay_renders(cluster: RealNodeCluster, kustomization: dict[str, Any], references: dict[str, str],
                            directory: Path) -> None:
    """The printed kustomization as is, at overlays/registry/ of a checkout (deploy/ linked beside it): `kubectl
    kustomize` renders deploy/ with both Deployments on the pushed references."""
    overlay = directory / "overlays" / "registry"
    overlay.mkdir(parents=True)
    (directory / "deploy").symlink_to(REPO_ROOT / "deploy")
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    rendered = cluster.kubectl("kustomize", str(overlay), check=True).stdout
    images = {doc["metadata"]["name"]: doc["spec"]["template"]["spec"]["containers"][0]["image"]
              for doc in yaml.safe_load_all(rendered) if doc and doc["kind"] == "Deployment"}
    assert images == {d: references[c].rsplit("@", 1)[0] for d, c in DEPLOYMENTS.items()}, rendered


@pytest.fixture(scope="module")
def registry(real_cluster: RealNodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    real_cluster.forget_images(f"{ADDRESS}:")  # names left by earlier runs' registries (other ports)
    try:
        with LocalRegistry(tmp_path_factory.mktemp("registry")) as started, \
                real_cluster.registry_configured(started.host, plain_http=True):
            yield started
    finally:
        real_cluster.forget_images(f"{ADDRESS}:")


@pytest.fixture
def deployed_from_registry(real_cluster: RealNodeCluster, registry: LocalRegistry,
                           tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """Push, deploy from the printed kustomization; afterwards the package's operator as it was. Yields the
    target's output and the pushed references (component: ref@digest)."""
    before = {d: operator_pods(real_cluster, d)[0]["spec"]["containers"][0]["image"] for d in DEPLOYMENTS}
    ca_bundle = webhook_ca_bundle(real_cluster)
    output = push(registry, f"e2e-{uuid.uuid4().hex[:8]}")
    kustomization = printed_kustomization(output)
    printed_overlay_renders(real_cluster, kustomization, printed_references(output), tmp_path / "printed")
    base = _overlay(tmp_path / "base", ca_bundle)  # deploy/ as the package deployed it (manual certificates)
    (tmp_path / "from-registry").mkdir()
    kustomization["resources"] = [os.path.relpath(base, tmp_path / "from-registry")]
    (tmp_path / "from-registry" / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    try:
        # --force-conflicts: earlier tests may have patched the Deployments (reconciler_flag), as reapply() knows
        result = real_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-k",
                                      str(tmp_path / "from-registry"), timeout=120)
        assert result.returncode == 0, result.stderr
        yield output, printed_references(output)
    finally:
        reapply(real_cluster, tmp_path / "restore", ca_bundle)
        wait_rolled_out(real_cluster, before)


def test_make_images_pushes_and_the_node_pulls_the_operator_from_the_registry(
        real_cluster: RealNodeCluster, registry: LocalRegistry, namespace: str,
        deployed_from_registry: tuple[str, dict[str, str]]) -> None:
    output, references = deployed_from_registry
    assert set(references) == {"webhook", "reconciler"}, output
    images = {}
    for deployment, component in DEPLOYMENTS.items():
        reference, digest = references[component].rsplit("@", 1)
        repository, tag = reference.rsplit(":", 1)
        assert repository == f"{registry.host}/{PATH}/mpijob-{component}", output
        assert registry.tags(f"{PATH}/mpijob-{component}") == [tag]
        images[deployment] = reference

    wait_rolled_out(real_cluster, images)
    for deployment, component in DEPLOYMENTS.items():
        repository = f"{registry.host}/{PATH}/mpijob-{component}"
        digest = references[component].rsplit("@", 1)[1]
        for pod in operator_pods(real_cluster, deployment):
            status = pod["status"]["containerStatuses"][0]
            assert status["imageID"] == f"{repository}@{digest}", status  # pulled from the registry, that manifest
        pulls = registry.manifest_pulls(f"{PATH}/mpijob-{component}")
        assert any(agent.startswith("containerd/") for _, _, agent in pulls), pulls

    log, _ = run_to_success(real_cluster, namespace, upstream_pi("openmpi", "pi"))
    assert_pi(log, ["pi-worker-0", "pi-worker-1"])
