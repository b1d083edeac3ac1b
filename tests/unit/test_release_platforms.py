"""The pure parts of a multi-architecture release (hack/build/release.sh, RELEASE.md): the digest of each platform's
image read from the pushed image index (hack/build/oci_index.py), refused unless it lists exactly the platforms
built; the config of a base image archived for another architecture (hack/build/platform_archive.py); what the
emulation check (hack/build/ensure-binfmt.sh) says without changing anything.
tests/e2e/test_release_multiarch.py pushes a real one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from hack.build import image_archive, oci_index, platform_archive

REPO_ROOT = Path(__file__).resolve().parents[2]
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
AMD64, ARM64 = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def entry(digest: str, architecture: str, os: str = "linux", **platform: str) -> dict[str, Any]:
    return {"mediaType": OCI_MANIFEST, "digest": digest, "size": 1234,
            "platform": {"architecture": architecture, "os": os, **platform}}


def index(*entries: dict[str, Any], media_type: str = OCI_INDEX) -> dict[str, Any]:
    return {"schemaVersion": 2, "mediaType": media_type, "manifests": list(entries)}


def test_each_platforms_digest_in_the_order_asked() -> None:
    pushed = index(entry(ARM64, "arm64", variant="v8"), entry(AMD64, "amd64"))
    assert oci_index.expected_digests(pushed, ["amd64", "arm64"]) == [("amd64", AMD64), ("arm64", ARM64)]
    assert oci_index.expected_digests(index(entry(AMD64, "amd64")), ["amd64"]) == [("amd64", AMD64)]
    docker_list = index(entry(AMD64, "amd64"), media_type="application/vnd.docker.distribution.manifest.list.v2+json")
    assert oci_index.platform_digests(docker_list) == {"amd64": AMD64}


@pytest.mark.parametrize(("pushed", "architectures", "message"), [
    pytest.param(index(entry(AMD64, "amd64")), ["amd64", "arm64"],
                 "the index lists linux/amd64, not linux/amd64, linux/arm64", id="a platform missing"),
    pytest.param(index(entry(AMD64, "amd64"), entry(ARM64, "arm64")), ["amd64"],
                 "the index lists linux/amd64, linux/arm64, not linux/amd64", id="one too many"),
    pytest.param(index(entry(AMD64, "amd64"), entry(ARM64, "amd64")), ["amd64"], "two images for linux/amd64",
                 id="twice"),
    pytest.param(index(entry(AMD64, "amd64", os="windows")), ["amd64"],
                 f"{AMD64}: platform {{'architecture': 'amd64', 'os': 'windows'}} is not linux/<architecture>",
                 id="not linux"),
    pytest.param({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": []}, ["amd64"],
                 f"not an image index (mediaType '{OCI_MANIFEST}')", id="an image, not an index"),
])
def test_an_index_other_than_the_platforms_built_is_refused(pushed: dict[str, Any], architectures: list[str],
                                                            message: str) -> None:
    with pytest.raises(oci_index.UnexpectedIndexError) as raised:
        oci_index.expected_digests(pushed, architectures)
    assert str(raised.value) == message


def test_the_command_prints_a_line_per_platform_or_fails_with_the_reason() -> None:
    def run(pushed: dict[str, Any], expect: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hack.build.oci_index", "--expect", expect], cwd=REPO_ROOT,
                              input=json.dumps(pushed), capture_output=True, text=True, timeout=30, check=False)

    ok = run(index(entry(ARM64, "arm64", variant="v8"), entry(AMD64, "amd64")), "amd64,arm64")
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, f"amd64 {AMD64}\narm64 {ARM64}\n", "")
    refused = run(index(entry(AMD64, "amd64")), "amd64,arm64")
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1, "", "oci_index: the index lists linux/amd64, not linux/amd64, linux/arm64\n")


def test_a_base_archived_for_arm64_says_so_and_nothing_else_changes(tmp_path: Path) -> None:
    layer = tmp_path / "layer.tar"
    with tarfile.open(layer, "w") as archive:
        archive.addfile(tarfile.TarInfo("etc"))
    args = ["--layer", str(layer), "--tag", "mpijob-operator/python-base:3.11-bookworm-arm64", "--cmd", "python3"]
    assert platform_archive.main(["--architecture", "arm64", *args, "--out", str(tmp_path / "arm64.tar")]) == 0
    with tarfile.open(layer, "w") as archive:
        archive.addfile(tarfile.TarInfo("etc"))
    assert image_archive.main([*args, "--out", str(tmp_path / "host.tar")]) == 0

    def config(path: Path) -> dict[str, Any]:
        with tarfile.open(path) as archive:
            (manifest,) = json.load(archive.extractfile("manifest.json"))  # type: ignore[arg-type]
            loaded: dict[str, Any] = json.load(archive.extractfile(manifest["Config"]))  # type: ignore[arg-type]
            return loaded

    host = config(tmp_path / "host.tar")
    assert host["architecture"] == "amd64"  # what image_archive writes for every image
    assert config(tmp_path / "arm64.tar") == {**host, "architecture": "arm64", "variant": "v8"}
    assert platform_archive.platform_config(host, "amd64") == host


def test_the_emulation_check_passes_the_host_and_refuses_an_unknown_architecture() -> None:
    """hack/build/ensure-binfmt.sh before anything it could change: the host's architecture needs nothing, and an
    architecture the release does not build is refused with the reason the release prints."""
    if shutil.which("dpkg") is None:
        pytest.skip("no dpkg: the release and its emulation check need Debian")
    host = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()
    script = str(REPO_ROOT / "hack" / "build" / "ensure-binfmt.sh")
    native = subprocess.run(["bash", script, host], capture_output=True, text=True, timeout=30, check=False)
    assert (native.returncode, native.stdout, native.stderr) == (0, "", "")
    unknown = subprocess.run(["bash", script, "s390x"], capture_output=True, text=True, timeout=30, check=False)
    assert (unknown.returncode, unknown.stdout, unknown.stderr) == (
        2, "", "cannot run s390x binaries: only amd64 and arm64 are known here\n")
