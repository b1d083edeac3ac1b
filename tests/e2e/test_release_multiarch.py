"""A multi-architecture release, run only when asked: `RELEASE_PLATFORMS=linux/amd64,linux/arm64 make test
T=tests/e2e/test_release_multiarch.py` (RELEASE.md, "Architectures"). Without RELEASE_PLATFORMS every test here
skips and says so: the other architecture's images are built under emulation (qemu-user-static), minutes of both
cores, which `make test` and CI never spend (tests/e2e/test_release.py cuts host-only releases, PLATFORMS set to the
host's, on every run).

`make release VERSION=9.9.3 PLATFORMS=$RELEASE_PLATFORMS ... UNCHECKED=1` into a local registry (Debian's
docker-registry, plain HTTP), signed with a key pair made for the run; then, from the registry, as a client sees it:
each image tag is an OCI image index listing one image per platform, each image's config naming its architecture,
the digests those the release printed; each platform's image runs its own architecture's Python (`buildah run` of
the image pulled by its digest: under qemu for a foreign one, `platform.machine()` is that architecture's, and the
component's `--help` works); each platform's SBOM lists that architecture's Debian packages; every index, image,
SBOM and the chart verifies with the key (cosign), and not with another. The release's own time is printed.
Needs root (buildah) and Go (cosign); no real node.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hack.devcluster.binaries import REPO_ROOT
from hack.devcluster.mpijobs import JSON
from hack.devcluster.registry import LocalRegistry
from tests.e2e.test_release import find_cosign, key_pair

VERSION = "9.9.3"
PLATFORMS_ENV = "RELEASE_PLATFORMS"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MACHINE = {"amd64": "x86_64", "arm64": "aarch64"}  # Debian architecture: what Python's platform.machine() says
COMPONENTS = ("webhook", "reconciler")
TIMEOUT = 5400  # a cold build of both architectures' images under emulation, with the signing
# on each test (the first one's includes the release): a test's own timeout marker comes before the tier's 600 s
long_timeout = pytest.mark.timeout(TIMEOUT)


def requested_architectures() -> list[str]:
    platforms = os.environ.get(PLATFORMS_ENV, "")
    if not platforms:
        pytest.skip(f"{PLATFORMS_ENV} is not set: the multi-architecture release (the other architecture built "
                    "under emulation, many minutes) runs only when asked (RELEASE.md, Architectures)")
    return [platform.removeprefix("linux/") for platform in platforms.split(",")]


@dataclass(frozen=True)
class Release:
    registry: LocalRegistry
    architectures: list[str]
    printed: dict[str, str]  # the release's last lines: artifact -> ref@digest
    stdout: str
    cosign: Path
    keys: Path

    def digest(self, artifact: str) -> str:
        return self.printed[artifact].rsplit("@", 1)[1]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    architectures = requested_architectures()
    if os.geteuid() != 0:
        pytest.skip("buildah builds and runs the images as root: run the e2e tier as root")
    cosign = find_cosign()
    assert cosign is not None, "cosign cannot be built here (no Go): the release's signatures cannot be verified"
    work = tmp_path_factory.mktemp("release-multiarch")
    key_pair(cosign, work / "keys")
    key_pair(cosign, work / "keys" / "other")
    with LocalRegistry(work / "registry") as registry:
        began = time.monotonic()
        result = subprocess.run(
            ["make", "-s", "release", f"VERSION={VERSION}", f"REGISTRY={registry.host}",
             f"PLATFORMS={os.environ[PLATFORMS_ENV]}", "INSECURE=1", "UNCHECKED=1",
             f"COSIGN_KEY={work / 'keys' / 'cosign.key'}"],
            cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "COSIGN_PASSWORD": ""},
            timeout=TIMEOUT - 300, check=False)
        took = time.monotonic() - began
        assert result.returncode == 0, result.stdout
        printed = dict(line.split("=", 1) for line in result.stdout.splitlines()
                       if line.startswith((*COMPONENTS, "chart")) and "=" in line)
        print(f"\nmake release PLATFORMS={os.environ[PLATFORMS_ENV]}: {took:.0f} s\n{result.stdout}")
        yield Release(registry, architectures, printed, result.stdout, cosign, work / "keys")


def get(registry: LocalRegistry, path: str, accept: str = "") -> bytes:
    request = urllib.request.Request(f"http://{registry.host}/v2/{path}", headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=30) as response:
        body: bytes = response.read()
    return body


def sha256(body: bytes) -> str:
    return f"sha256:{hashlib.sha256(body).hexdigest()}"


@long_timeout
def test_the_release_printed_every_digest_of_every_platform(release: Release) -> None:
    expected = ["webhook", "reconciler", "chart",
                *(f"{c}-{a}{s}" for c in COMPONENTS for a in release.architectures for s in ("", "-sbom"))]
    assert list(release.printed) == expected, release.stdout
    for component in COMPONENTS:
        assert release.printed[component].startswith(f"{release.registry.host}/mpijob-{component}:{VERSION}@")
        for arch in release.architectures:
            assert release.printed[f"{component}-{arch}"] == \
                f"{release.registry.host}/mpijob-{component}@{release.digest(f'{component}-{arch}')}"
    assert "not built" not in release.stdout, release.stdout  # every platform asked for was built


@long_timeout
def test_each_tag_is_an_index_of_one_image_per_platform_each_config_naming_its_architecture(release: Release) -> None:
    for component in COMPONENTS:
        repository = f"mpijob-{component}"
        body = get(release.registry, f"{repository}/manifests/{VERSION}", OCI_INDEX)
        assert sha256(body) == release.digest(component)
        index: JSON = json.loads(body)
        assert index["mediaType"] == OCI_INDEX
        listed = {entry["platform"]["architecture"]: entry for entry in index["manifests"]}
        assert sorted(listed) == sorted(release.architectures)
        assert len(index["manifests"]) == len(release.architectures)
        for arch, entry in listed.items():
            assert (entry["mediaType"], entry["platform"]["os"], entry["digest"]) == (
                OCI_MANIFEST, "linux", release.digest(f"{component}-{arch}"))
            manifest_body = get(release.registry, f"{repository}/manifests/{entry['digest']}", OCI_MANIFEST)
            assert sha256(manifest_body) == entry["digest"]
            manifest: JSON = json.loads(manifest_body)
            config: JSON = json.loads(get(release.registry, f"{repository}/blobs/{manifest['config']['digest']}"))
            assert (config["os"], config["architecture"]) == ("linux", arch)
            assert config["config"]["Labels"]["org.opencontainers.image.version"] == VERSION
            assert config["config"]["Entrypoint"] == ["python", "-m", component]


def buildah_run(image: str, *command: str) -> str:
    """COMMAND's output in a container of IMAGE (name@digest, pulled from the plain-HTTP registry by buildah, which
    runs a foreign architecture's binaries under qemu through binfmt_misc)."""
    container = subprocess.run(["buildah", "from", "--quiet", "--tls-verify=false", f"docker://{image}"],
                               capture_output=True, text=True, timeout=600, check=True).stdout.strip()
    try:
        result = subprocess.run(["buildah", "run", "--isolation", "chroot", container, "--", *command],
                                capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 0, (command, result.stdout, result.stderr)
        return result.stdout
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, timeout=120, check=True)
        subprocess.run(["buildah", "rmi", image], capture_output=True, timeout=120, check=False)


@long_timeout
def test_each_platforms_image_runs_its_own_architectures_python(release: Release) -> None:
    for arch in release.architectures:
        for component in COMPONENTS:
            image = release.printed[f"{component}-{arch}"]
            assert buildah_run(image, "python3", "-c", "import platform; print(platform.machine())") == \
                f"{MACHINE[arch]}\n"
            assert buildah_run(image, "python", "-m", component, "--help").startswith(
                f"usage: python -m {component} [-h]")


@long_timeout
def test_each_platforms_sbom_lists_that_architectures_packages(release: Release) -> None:
    for component in COMPONENTS:
        for arch in release.architectures:
            name, digest = release.printed[f"{component}-{arch}-sbom"].rsplit("@", 1)
            assert name == f"{release.registry.host}/mpijob-{component}:" \
                f"{release.digest(f'{component}-{arch}').replace(':', '-')}.sbom"
            manifest: JSON = json.loads(get(release.registry, f"mpijob-{component}/manifests/{digest}", OCI_MANIFEST))
            document: JSON = json.loads(get(release.registry, f"mpijob-{component}/blobs/"
                                            f"{manifest['layers'][0]['digest']}"))
            assert document["name"] == f"{release.registry.host}/mpijob-{component}:{VERSION}@" \
                f"{release.digest(f'{component}-{arch}')}"
            purls = [p["externalRefs"][0]["referenceLocator"] for p in document["packages"]]
            assert f"?arch={arch}&repository_url=" in purls[0]
            python = [p for p in purls if p.startswith("pkg:deb/debian/python3.11@")]
            assert [p.rsplit("?", 1)[1] for p in python] == [f"arch={arch}"], python


def verify(release: Release, public_key: Path, reference: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(release.cosign), "verify", "--key", str(public_key), "--insecure-ignore-tlog=true",
                           "--allow-insecure-registry", "--allow-http-registry", "--output=json", reference],
                          capture_output=True, text=True, timeout=120, check=False)


@long_timeout
def test_every_index_image_sbom_and_the_chart_verify_with_the_maintainers_key(release: Release) -> None:
    for artifact, reference in release.printed.items():
        name, digest = reference.rsplit("@", 1)
        head, _, last = name.removeprefix("oci://").rpartition("/")
        name = f"{head}/{last.split(':', 1)[0]}"  # the repository, without the tag the reference may have
        result = verify(release, release.keys / "cosign.pub", f"{name}@{digest}")
        assert result.returncode == 0, (artifact, result.stderr)
        (payload,) = json.loads(result.stdout)
        assert payload["critical"]["image"]["docker-manifest-digest"] == digest
        other = verify(release, release.keys / "other" / "cosign.pub", f"{name}@{digest}")
        assert other.returncode != 0, (artifact, other.stdout)
        assert "no matching signatures" in other.stderr, (artifact, other.stderr)
