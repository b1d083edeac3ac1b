"""Two releases cut by `make release` and installed from the registry the way an admin would (RELEASE.md,
docs/operator-guide.md#install-a-released-version), on the real node.

`make release VERSION=9.9.1 ... UNCHECKED=1` and then 9.9.2 (UNCHECKED: neither is the checkout's version nor has
a CHANGELOG section), each with PLATFORMS set to this machine's platform alone (the suite never builds another
architecture's images: tests/e2e/test_release_multiarch.py does, when asked), push both images (each tag an image
index of that one platform's image), their SBOMs (each an SPDX document of that image) and the chart to a local
registry (Debian's docker-registry, plain HTTP, the node's containerd told about it), each signed with a key pair
made for the test (cosign, built from the Go module proxy: every signature verifies with that key and not with
another; without Go the releases are unsigned and that test skips). The module swaps the
package's kustomize-deployed operator for `helm install mpi-operator oci://<registry>/charts/mpi-operator
--version 9.9.1` with the manual certificates and nothing about images: the chart's defaults name the release's
images, tagged with its appVersion. A pi job runs; then, while a second job is held mid-run, `helm upgrade` to
9.9.2: both Deployments roll to the 9.9.2 images (the pods' imageIDs are the digests the release printed), the
new reconciler takes the job over and it succeeds with the same pods. At the end the release is uninstalled and
the package's operator deployed with kustomize again, however the tests end. The tests run in the order of this
file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hack.build import oci_index
from hack.devcluster import HarnessError
from hack.devcluster.binaries import REPO_ROOT
from hack.devcluster.helm import RELEASE, RELEASE_NAMESPACE, find_helm, helm, value_flags
from hack.devcluster.mpijobs import JSON
from hack.devcluster.operator_deploy import (
    NAMESPACE,
    RECONCILER,
    WEBHOOK,
    adopt_crd,
    certificates,
    deploy,
    helm_uninstall,
    lease_holder,
    remove,
    wait_ready,
)
from hack.devcluster.realnode import RealNodeCluster
from hack.devcluster.registry import ADDRESS, LocalRegistry
from hack.devcluster.wait import wait_for
from hack.gen import chart as gen_chart
from tests.e2e.held import assert_adopted, assert_completes, held_pi, is_running, launcher_job_uid, wait_held
from tests.e2e.jobs import apply, assert_pi, run_to_success, upstream_pi

VERSIONS = ("9.9.1", "9.9.2")
DEPLOYMENTS = {WEBHOOK: "webhook", RECONCILER: "reconciler"}  # Deployment: its image's component
HELM_CONFIG = "application/vnd.cncf.helm.config.v1+json"  # the config media type of a chart pushed by helm
SPDX = "application/spdx+json"
HOST = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=False).stdout.strip()
PLATFORM = f"linux/{HOST}"  # the one platform the suite's releases are built for
# the last lines of make release: the indexes, the chart, then each component's image for the platform and its SBOM
PRINTED = ("webhook", "reconciler", "chart", f"webhook-{HOST}", f"webhook-{HOST}-sbom", f"reconciler-{HOST}",
           f"reconciler-{HOST}-sbom")


@dataclass(frozen=True)
class Released:
    """What `make release` printed for one version: artifact (PRINTED) -> ref@digest."""
    version: str
    references: dict[str, str]

    def digest(self, component: str) -> str:
        return self.references[component].rsplit("@", 1)[1]

    def image(self, component: str) -> str:
        return self.references[component].rsplit("@", 1)[0]

    def repository(self, artifact: str) -> str:
        """ARTIFACT's repository, without the tag its printed reference may have."""
        head, _, last = self.image(artifact).removeprefix("oci://").rpartition("/")
        return f"{head}/{last.split(':', 1)[0]}"


@dataclass(frozen=True)
class Setup:
    helm: Path
    registry: LocalRegistry
    releases: dict[str, Released]
    flags: list[str]  # the admin's values: the manual certificates, nothing about images
    cosign: Path | None  # None: cosign cannot be built here (no Go), the releases are not signed
    keys: Path  # the maintainers' key pair (cosign.key, cosign.pub), and another's (other/cosign.pub)


def find_cosign() -> Path | None:
    """cosign, built from the Go module proxy on first use (hack/build/build-cosign.sh); None without Go."""
    result = subprocess.run(["bash", str(REPO_ROOT / "hack" / "build" / "build-cosign.sh")], stdout=subprocess.PIPE,
                            text=True, timeout=1800, check=False)
    if result.returncode == 2 and shutil.which("go") is None:
        return None
    assert result.returncode == 0, "hack/build/build-cosign.sh failed (its output is above)"
    return Path(result.stdout.strip().splitlines()[-1])


def key_pair(cosign: Path, directory: Path) -> None:
    directory.mkdir(parents=True)
    subprocess.run([str(cosign), "generate-key-pair"], cwd=directory, env={**os.environ, "COSIGN_PASSWORD": ""},
                   capture_output=True, check=True, timeout=60)


def make_release(registry: LocalRegistry, version: str, key: Path | None) -> Released:
    """`make release` as a maintainer runs it (UNCHECKED=1: a test version), signing with KEY; what it printed."""
    signing = [f"COSIGN_KEY={key}"] if key else []
    result = subprocess.run(["make", "-s", "release", f"VERSION={version}", f"REGISTRY={registry.host}",
                             f"PLATFORMS={PLATFORM}", "INSECURE=1", "UNCHECKED=1", *signing], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "COSIGN_PASSWORD": ""}, timeout=900,
                            check=False)
    assert result.returncode == 0, result.stdout
    lines = [line.split("=", 1) for line in result.stdout.splitlines()
             if line.startswith(tuple(f"{name}=" for name in PRINTED))]
    assert [name for name, _ in lines] == list(PRINTED), result.stdout
    assert f"Architectures: {PLATFORM} (native; " in result.stdout, result.stdout  # what was built, and how
    return Released(version, dict(lines))


def manifest_digest(registry: LocalRegistry, repository: str, tag: str) -> tuple[str, JSON]:
    """The digest (sha256 of the stored bytes) and content of the OCI manifest REPOSITORY:TAG."""
    request = urllib.request.Request(f"http://{registry.host}/v2/{repository}/manifests/{tag}",
                                     headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    manifest: JSON = json.loads(body)
    return f"sha256:{hashlib.sha256(body).hexdigest()}", manifest


def blob(registry: LocalRegistry, repository: str, digest: str) -> bytes:
    with urllib.request.urlopen(f"http://{registry.host}/v2/{repository}/blobs/{digest}", timeout=10) as response:
        content: bytes = response.read()
    assert f"sha256:{hashlib.sha256(content).hexdigest()}" == digest
    return content


def image_index(registry: LocalRegistry, repository: str, tag: str) -> tuple[str, JSON]:
    """The digest and content of the image index REPOSITORY:TAG."""
    request = urllib.request.Request(f"http://{registry.host}/v2/{repository}/manifests/{tag}",
                                     headers={"Accept": oci_index.INDEX_TYPES[0]})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    index: JSON = json.loads(body)
    return f"sha256:{hashlib.sha256(body).hexdigest()}", index


def check_sbom(registry: LocalRegistry, released: Released, component: str) -> None:
    """The SBOM pushed beside COMPONENT's image for the platform: tagged by that image's digest, one SPDX layer
    describing that image, its Debian and Python packages, the project's own at its version among them."""
    repository, digest = f"mpijob-{component}", released.digest(f"{component}-{HOST}")
    tag = f"{digest.replace(':', '-')}.sbom"
    assert released.image(f"{component}-{HOST}-sbom") == f"{registry.host}/{repository}:{tag}"
    manifest_sha, manifest = manifest_digest(registry, repository, tag)
    assert manifest_sha == released.digest(f"{component}-{HOST}-sbom")
    assert (manifest["artifactType"], [layer["mediaType"] for layer in manifest["layers"]]) == (SPDX, [SPDX])
    document = json.loads(blob(registry, repository, manifest["layers"][0]["digest"]))
    assert (document["spdxVersion"], document["name"]) == ("SPDX-2.3", f"{released.image(component)}@{digest}")
    root, *packages = document["packages"]
    assert (root["name"], root["versionInfo"]) == (f"{registry.host}/{repository}", released.version)
    assert f"?arch={HOST}&" in root["externalRefs"][0]["referenceLocator"]
    assert document["relationships"] == [
        {"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES", "relatedSpdxElement": "SPDXRef-Image"},
        *({"spdxElementId": "SPDXRef-Image", "relationshipType": "CONTAINS", "relatedSpdxElement": p["SPDXID"]}
          for p in packages)]
    purls = {p["externalRefs"][0]["referenceLocator"].split("@")[0] for p in packages}
    assert {"pkg:pypi/mpijob-operator", "pkg:pypi/pydantic", "pkg:deb/debian/python3.11"} <= purls, purls
    ours = [p["versionInfo"] for p in packages if p["name"] == "mpijob-operator"]
    assert ours == [gen_chart.project_version()]  # the checkout's project, as built


def oci_chart(setup: Setup) -> str:
    return f"oci://{setup.registry.host}/charts/mpi-operator"


def operator_pods(cluster: RealNodeCluster, deployment: str) -> list[JSON]:
    """Deployment's pods, those being deleted included."""
    pods: list[JSON] = cluster.rest.get(
        f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app.kubernetes.io/name={deployment}")["items"]
    return pods


def runs_release(cluster: RealNodeCluster, released: Released) -> dict[str, list[str]] | None:
    """Both Deployments rolled out on RELEASED's images: as many pods as replicas, none other left, each Ready and
    running the image by the digest the release printed; the reconciler's pod holds the Lease. Pod names by
    Deployment, else None."""
    names: dict[str, list[str]] = {}
    for deployment, component in DEPLOYMENTS.items():
        dep = cluster.rest.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{deployment}")
        status, pods = dep.get("status") or {}, operator_pods(cluster, deployment)
        if not (status.get("observedGeneration") == dep["metadata"]["generation"]
                and status.get("updatedReplicas") == status.get("availableReplicas") == dep["spec"]["replicas"]
                == len(pods)):
            return None
        for pod in pods:
            statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
            image = released.image(component)
            if (pod["metadata"].get("deletionTimestamp") or pod["spec"]["containers"][0]["image"] != image
                    or not statuses[0].get("ready")
                    or statuses[0].get("imageID") != f"{image.rsplit(':', 1)[0]}@{released.digest(component)}"):
                return None
        names[deployment] = sorted(p["metadata"]["name"] for p in pods)
    (reconciler,) = names[RECONCILER]
    return names if lease_holder(cluster).startswith(reconciler + "_") else None


def wait_runs_release(cluster: RealNodeCluster, released: Released) -> dict[str, list[str]]:
    names = wait_for(lambda: runs_release(cluster, released), 300, 1,
                     what=f"the operator rolled out on release {released.version}'s images")
    assert names is not None
    return names


def listed(setup: Setup, cluster: RealNodeCluster) -> list[tuple[str, str, str]]:
    """`helm list`: (name, chart, app version) of each release."""
    out = helm(setup.helm, "list", f"--namespace={RELEASE_NAMESPACE}", "--output=json", kubeconfig=cluster.kubeconfig)
    return [(r["name"], r["chart"], r["app_version"]) for r in json.loads(out)]


@pytest.fixture(scope="module")
def setup(real_cluster: RealNodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """The two releases in a local registry the node pulls from; the package's operator removed (the CRD kept)
    and 9.9.1 installed from the registry in its place; afterwards the release uninstalled and the operator
    deployed with kustomize again."""
    try:
        binary = find_helm()
    except HarnessError as exc:
        pytest.skip(f"helm is not available: {exc}")
    work_dir = tmp_path_factory.mktemp("release")
    real_cluster.forget_images(f"{ADDRESS}:")  # names left by earlier runs' registries (other ports)
    try:
        with LocalRegistry(work_dir / "registry") as registry, \
                real_cluster.registry_configured(registry.host, plain_http=True):
            cosign = find_cosign()
            if cosign is not None:
                key_pair(cosign, work_dir / "keys")
                key_pair(cosign, work_dir / "keys" / "other")
            key = work_dir / "keys" / "cosign.key" if cosign else None
            releases = {version: make_release(registry, version, key) for version in VERSIONS}
            certs = certificates(work_dir / "webhook-certs")
            flags = value_flags({"certificates.mode": "manual"}, files={
                "certificates.manual.caBundle": certs / "ca-bundle.b64",
                "certificates.manual.tlsCrt": certs / "tls.crt", "certificates.manual.tlsKey": certs / "tls.key"})
            setup = Setup(binary, registry, releases, flags, cosign, work_dir / "keys")
            remove(real_cluster, work_dir / "kustomize")
            try:
                adopt_crd(real_cluster)  # docs/operator-guide.md#with-helm: the CRD applied before, adopted
                helm(binary, "install", RELEASE, oci_chart(setup), "--version", VERSIONS[0], "--plain-http",
                     f"--namespace={RELEASE_NAMESPACE}", *flags, kubeconfig=real_cluster.kubeconfig)
                wait_ready(real_cluster)
                yield setup
            finally:
                if RELEASE in helm(binary, "list", f"--namespace={RELEASE_NAMESPACE}", "--short",
                                   kubeconfig=real_cluster.kubeconfig).split():
                    helm_uninstall(real_cluster, binary)
                deploy(real_cluster, work_dir / "kustomize-again")
    finally:
        real_cluster.forget_images(f"{ADDRESS}:")


def test_make_release_pushes_both_versions_with_their_digests(setup: Setup) -> None:
    registry = setup.registry
    signed = setup.cosign is not None  # then a signature beside each image, SBOM and chart (sha256-<hex>.sig)
    for component in ("webhook", "reconciler"):  # each version's index and, beside its image, that image's SBOM
        sboms = [f"{r.digest(f'{component}-{HOST}').replace(':', '-')}.sbom" for r in setup.releases.values()]
        signatures = [f"{r.digest(a).replace(':', '-')}.sig" for r in setup.releases.values()
                      for a in (component, f"{component}-{HOST}", f"{component}-{HOST}-sbom")] if signed else []
        assert sorted(registry.tags(f"mpijob-{component}")) == sorted([*VERSIONS, *sboms, *signatures])
    signatures = [f"{r.digest('chart').replace(':', '-')}.sig" for r in setup.releases.values()] if signed else []
    assert sorted(registry.tags("charts/mpi-operator")) == sorted([*VERSIONS, *signatures])
    for version, released in setup.releases.items():
        for component in ("webhook", "reconciler"):
            assert released.image(component) == f"{registry.host}/mpijob-{component}:{version}"
            assert released.image(f"{component}-{HOST}") == f"{registry.host}/mpijob-{component}"
            digest, index = image_index(registry, f"mpijob-{component}", version)  # of the one platform's image
            assert (digest, oci_index.expected_digests(index, [HOST])) == (
                released.digest(component), [(HOST, released.digest(f"{component}-{HOST}"))])
        assert released.image("chart") == f"{oci_chart(setup)}:{version}"
        digest, manifest = manifest_digest(registry, "charts/mpi-operator", version)
        assert (digest, manifest["config"]["mediaType"]) == (released.digest("chart"), HELM_CONFIG)
        for component in ("webhook", "reconciler"):
            check_sbom(registry, released, component)
    first, second = (setup.releases[v] for v in VERSIONS)
    # each release's images carry its version (a label): digests of their own
    assert all(first.digest(c) != second.digest(c) for c in ("webhook", "reconciler", "chart", *PRINTED[3:]))


def verify(setup: Setup, public_key: Path, reference: str) -> subprocess.CompletedProcess[str]:
    """`cosign verify` of REFERENCE (name@digest) with PUBLIC_KEY, as RELEASE.md tells admins."""
    assert setup.cosign is not None
    return subprocess.run([str(setup.cosign), "verify", "--key", str(public_key), "--insecure-ignore-tlog=true",
                           "--allow-insecure-registry", "--allow-http-registry", "--output=json", reference],
                          capture_output=True, text=True, timeout=120, check=False)


def test_everything_a_release_pushed_is_signed_by_the_maintainers_key(setup: Setup) -> None:
    if setup.cosign is None:
        pytest.skip("cosign cannot be built here (no Go): the releases were not signed")
    for released in setup.releases.values():
        for artifact in PRINTED:
            name, digest = released.repository(artifact), released.digest(artifact)
            result = verify(setup, setup.keys / "cosign.pub", f"{name}@{digest}")
            assert result.returncode == 0, result.stderr
            (payload,) = json.loads(result.stdout)  # one signature, of that digest
            assert payload["critical"]["image"]["docker-manifest-digest"] == digest
            other = verify(setup, setup.keys / "other" / "cosign.pub", f"{name}@{digest}")
            assert other.returncode != 0, other.stdout
            assert "no matching signatures" in other.stderr, other.stderr


def test_helm_install_of_a_version_from_the_registry_runs_a_job(real_cluster: RealNodeCluster, setup: Setup,
                                                               namespace: str) -> None:
    assert listed(setup, real_cluster) == [(RELEASE, f"mpi-operator-{VERSIONS[0]}", VERSIONS[0])]
    names = wait_runs_release(real_cluster, setup.releases[VERSIONS[0]])
    assert {d: len(pods) for d, pods in names.items()} == {
        d: real_cluster.rest.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{d}")["spec"]["replicas"]
        for d in DEPLOYMENTS}
    pulls = setup.registry.manifest_pulls("mpijob-reconciler")
    assert any(agent.startswith("containerd/") for _, _, agent in pulls), pulls  # pulled by the node

    log, took = run_to_success(real_cluster, namespace, upstream_pi("openmpi", "pi"))
    assert_pi(log, ["pi-worker-0", "pi-worker-1"])
    print(f"\npi under release {VERSIONS[0]}: Succeeded in {took:.1f} s")


def test_helm_upgrade_to_the_next_version_while_a_job_runs(real_cluster: RealNodeCluster, setup: Setup,
                                                          namespace: str) -> None:
    old = wait_runs_release(real_cluster, setup.releases[VERSIONS[0]])
    apply(real_cluster, namespace, held_pi("pi"))
    before = wait_held(real_cluster, namespace, "pi")
    wait_for(lambda: is_running(real_cluster, namespace, "pi"), 60, 0.5, what="the job's Running condition")
    launcher = launcher_job_uid(real_cluster, namespace, "pi")

    began = time.monotonic()
    helm(setup.helm, "upgrade", RELEASE, oci_chart(setup), "--version", VERSIONS[1], "--plain-http",
         f"--namespace={RELEASE_NAMESPACE}", *setup.flags, kubeconfig=real_cluster.kubeconfig)
    new = wait_runs_release(real_cluster, setup.releases[VERSIONS[1]])
    print(f"\nhelm upgrade {VERSIONS[0]} -> {VERSIONS[1]}: rolled out, the new reconciler leading, in "
          f"{time.monotonic() - began:.1f} s")
    assert {d: len(pods) for d, pods in new.items()} == {d: len(pods) for d, pods in old.items()}
    assert all(not set(new[d]) & set(old[d]) for d in DEPLOYMENTS), (old, new)  # every pod replaced
    assert listed(setup, real_cluster) == [(RELEASE, f"mpi-operator-{VERSIONS[1]}", VERSIONS[1])]

    # The new reconciler has seen the job and kept it as it was.
    assert_adopted(real_cluster, namespace, "pi", before, launcher)

    final = assert_completes(real_cluster, namespace, "pi", before)
    assert final["status"]["replicaStatuses"]["Launcher"] == {"succeeded": 1}
