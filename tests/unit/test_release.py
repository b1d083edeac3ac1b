"""`make release`'s refusals (hack/build/release.sh, RELEASE.md), which come before it builds anything: VERSION not
pyproject.toml's, no CHANGELOG.md section for it, uncommitted changes; each named, all at once. The script runs
in a small git repository laid out as the checkout (tests/e2e/test_release.py runs a whole release)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
MISMATCH = "VERSION={v} is not pyproject.toml's version 0.2.0 (change it there, then `make chart`)"
NO_NOTES = "CHANGELOG.md has no '## {v}' (or '## [{v}]') section"
DIRTY = "the checkout has uncommitted changes (git status)"


def checkout(directory: Path, changelog: str, *, dirty: bool) -> Path:
    """A git repository with release.sh at hack/build/, pyproject.toml at version 0.2.0 and CHANGELOG.md, committed;
    with DIRTY a file changed after the commit."""
    (directory / "hack" / "build").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "hack" / "build" / "release.sh", directory / "hack" / "build" / "release.sh")
    (directory / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0.2.0"\n')
    (directory / "CHANGELOG.md").write_text(f"# Changelog\n\n## Unreleased\n\n{changelog}\n")
    git = ["git", "-C", str(directory), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    if dirty:
        (directory / "CHANGELOG.md").write_text("changed\n" + (directory / "CHANGELOG.md").read_text())
    return directory


@pytest.mark.parametrize(("version", "changelog", "dirty", "problems"), [
    pytest.param("9.9.1", "## 0.2.0 - 2026-12-06", True, [MISMATCH, NO_NOTES, DIRTY], id="all three"),
    pytest.param("0.2.0", "## 0.2.0-rc.1", False, [NO_NOTES], id="only a pre-release's notes"),
    pytest.param("0.2.0", "## [0.2.0] - 2026-12-06", True, [DIRTY], id="uncommitted"),
    pytest.param("0.2.1", "## [0.2.1]", False, [MISMATCH], id="not pyproject's"),
])
def test_make_release_refuses_before_building(tmp_path: Path, version: str, changelog: str, dirty: bool,
                                              problems: list[str]) -> None:
    root = checkout(tmp_path / "repo", changelog, dirty=dirty)
    env = {k: v for k, v in os.environ.items() if k not in ("UNCHECKED", "INSECURE", "PLATFORMS")}
    result = subprocess.run(["bash", str(root / "hack" / "build" / "release.sh")], capture_output=True, text=True,
                            env={**env, "VERSION": version, "REGISTRY": "registry.example.com/mpi"}, timeout=60,
                            check=False)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines() == [f"release {version} refused:",
                                          *(f"  - {p.format(v=version)}" for p in problems)]


@pytest.mark.parametrize(("variables", "message"), [
    pytest.param({"VERSION": "1.2", "REGISTRY": "r.example.com"}, "VERSION=1.2 is not x.y.z[-pre]", id="not semver"),
    pytest.param({"VERSION": "v1.2.3", "REGISTRY": "r.example.com"}, "VERSION=v1.2.3 is not x.y.z", id="a v"),
    pytest.param({"VERSION": "1.2.3"}, "REGISTRY is required, without a scheme", id="no registry"),
    pytest.param({"VERSION": "1.2.3", "REGISTRY": "https://r.example.com"}, "without a scheme", id="a scheme"),
    pytest.param({"VERSION": "1.2.3", "REGISTRY": "r.example.com", "PLATFORMS": "linux/amd64,linux/s390x"},
                 "PLATFORMS=linux/amd64,linux/s390x: 'linux/s390x' is not linux/amd64 or linux/arm64",
                 id="an unknown platform"),
    pytest.param({"VERSION": "1.2.3", "REGISTRY": "r.example.com", "PLATFORMS": "arm64"},
                 "PLATFORMS=arm64: 'arm64' is not linux/amd64 or linux/arm64", id="no os"),
    pytest.param({"VERSION": "1.2.3", "REGISTRY": "r.example.com", "PLATFORMS": "linux/arm64,"},
                 "PLATFORMS=linux/arm64,: '' is not linux/amd64 or linux/arm64", id="an empty one"),
    pytest.param({"VERSION": "1.2.3", "REGISTRY": "r.example.com", "PLATFORMS": "linux/arm64,linux/amd64,linux/arm64"},
                 "PLATFORMS=linux/arm64,linux/amd64,linux/arm64 names linux/arm64 twice", id="twice"),
])
def test_make_release_refuses_bad_arguments(variables: dict[str, str], message: str) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("VERSION", "REGISTRY", "PLATFORMS", "UNCHECKED", "INSECURE")}
    result = subprocess.run(["make", "-s", "release", *(f"{k}={v}" for k, v in variables.items())], cwd=REPO_ROOT,
                            env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert "buildah" not in result.stderr + result.stdout, "nothing built"
