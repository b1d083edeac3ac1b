"""The registry path's pieces that run without a cluster: `make images` refusing bad arguments before it builds
anything, the registry access log read for pulls, and containerd's hosts.toml (tests/e2e/test_registry.py runs the
whole path on the real node)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hack.devcluster.realnode import RealNodeCluster
from hack.devcluster.registry import LocalRegistry

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("variables", "message"), [
    pytest.param({}, "usage: make images REGISTRY=", id="no registry"),
    pytest.param({"REGISTRY": "https://registry.example.com"}, "without a scheme", id="a scheme"),
    pytest.param({"REGISTRY": "registry.example.com", "TAG": "v1 beta"}, "is not a valid image tag", id="bad tag"),
    pytest.param({"REGISTRY": "registry.example.com", "TAG": ".hidden"}, "is not a valid image tag", id="tag's first"),
])
def test_make_images_refuses_bad_arguments_before_building(variables: dict[str, str], message: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REGISTRY", "TAG", "INSECURE")}
    result = subprocess.run(["make", "-s", "images", *(f"{k}={v}" for k, v in variables.items())], cwd=REPO_ROOT,
                            env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert "buildah" not in result.stderr + result.stdout, "nothing built"


def test_manifest_pulls_come_from_the_access_log(tmp_path: Path) -> None:
    registry = LocalRegistry(tmp_path)
    registry.log.write_text(
        'time="2026-12-05T11:33:26Z" level=info msg="response completed" http.request.method=PUT '
        "http.request.uri=/v2/mpijob/mpijob-webhook/manifests/try1 http.response.status=201\n"
        '127.0.0.1 - - [05/Dec/2026:11:33:26 +0000] "PUT /v2/mpijob/mpijob-webhook/manifests/try1 HTTP/1.1" 201 0 '
        '"" "skopeo/1.9.3"\n'
        '127.0.0.1 - - [05/Dec/2026:11:38:16 +0000] "HEAD /v2/mpijob/mpijob-webhook/manifests/try1 HTTP/1.1" 200 '
        '1234 "" "containerd/1.6.20~ds1"\n'
        '127.0.0.1 - - [05/Dec/2026:11:38:16 +0000] "GET /v2/mpijob/mpijob-webhook/manifests/sha256:ab HTTP/1.1" '
        '200 1234 "" "containerd/1.6.20~ds1"\n'
        '127.0.0.1 - - [05/Dec/2026:11:38:17 +0000] "GET /v2/mpijob/mpijob-reconciler/manifests/try1 HTTP/1.1" '
        '404 0 "" "containerd/1.6.20~ds1"\n')
    assert registry.manifest_pulls("mpijob/mpijob-webhook") == [
        ("HEAD", "try1", "containerd/1.6.20~ds1"), ("GET", "sha256:ab", "containerd/1.6.20~ds1")]
    assert registry.manifest_pulls("mpijob/mpijob-reconciler") == []


@pytest.mark.parametrize(("plain_http", "ca", "expected"), [
    pytest.param(True, None, 'server = "http://127.0.0.1:5000"\n\n[host."http://127.0.0.1:5000"]\n'
                             '  capabilities = ["pull", "resolve"]\n', id="plain HTTP"),
    pytest.param(False, Path("/ca.crt"), 'server = "https://127.0.0.1:5000"\n\n[host."https://127.0.0.1:5000"]\n'
                                         '  capabilities = ["pull", "resolve"]\n  ca = "/ca.crt"\n', id="own CA"),
])
def test_containerd_is_told_about_the_registry_and_forgets_it(tmp_path: Path, plain_http: bool, ca: Path | None,
                                                               expected: str) -> None:
    cluster = RealNodeCluster()
    cluster._work_dir = tmp_path  # as start() sets it; nothing is started
    with cluster.registry_configured("127.0.0.1:5000", plain_http=plain_http, ca=ca) as hosts:
        assert hosts == tmp_path / "node" / "certs.d" / "127.0.0.1:5000" / "hosts.toml"
        assert hosts.read_text() == expected
    assert not hosts.parent.exists()
