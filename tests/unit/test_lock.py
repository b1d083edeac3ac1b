"""The lock (requirements/<install>.txt, written by `make lock`) pins every dependency pyproject.toml declares for
that install, with hashes: a dependency added to pyproject.toml without `make lock` fails here, not in an image
build next month."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# The lock file of each install: the extras it is compiled from (Makefile, Dockerfile.webhook, Dockerfile.reconciler).
INSTALLS = {"webhook": ["webhook"], "reconciler": ["reconciler"], "dev": ["dev"], "bench": ["dev", "bench"]}
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)(.*)$")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(extras: list[str]) -> set[str]:
    """The names of the project's dependencies and those of ``extras``, its own extras followed."""
    names, todo, seen = set(), list(extras), set()
    requirements = list(PROJECT["dependencies"])
    while todo:
        extra = todo.pop()
        if extra not in seen:
            seen.add(extra)
            requirements += PROJECT["optional-dependencies"][extra]
    for requirement in requirements:
        match = _NAME.match(requirement)
        assert match, requirement
        if normalized(match.group(1)) == normalized(PROJECT["name"]):  # "mpijob-operator[webhook,reconciler]"
            names |= declared([extra.strip() for extra in (match.group(2) or "").split(",")])
        else:
            names.add(normalized(match.group(1)))
    return names


def locked(install: str) -> dict[str, str]:
    """Name -> the rest of its line (``==version ... --hash`` or a marker), for each package pinned."""
    text = (ROOT / "requirements" / f"{install}.txt").read_text()
    return {normalized(m.group(1)): m.group(2) + m.group(3) for m in map(_PIN.match, text.splitlines()) if m}


@pytest.mark.parametrize("install", INSTALLS)
def test_the_lock_pins_every_declared_dependency(install: str) -> None:
    missing = declared(INSTALLS[install]) - locked(install).keys()
    assert not missing, f"requirements/{install}.txt lacks {sorted(missing)}: run `make lock`"


@pytest.mark.parametrize("install", INSTALLS)
def test_every_pin_has_hashes(install: str) -> None:
    text = (ROOT / "requirements" / f"{install}.txt").read_text()
    entries = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])  # after uv's two header lines
    assert entries
    for entry in entries:
        assert "==" in entry.split("\\")[0], entry[:80]
        assert "--hash=sha256:" in entry, entry[:80]


def test_the_components_share_the_development_versions() -> None:
    dev = {name: line.split()[0] for name, line in locked("dev").items()}
    for install in ("webhook", "reconciler", "bench"):
        for name, line in locked(install).items():
            if name in dev:
                assert line.split()[0] == dev[name], f"{install}: {name} {line.split()[0]} != dev {dev[name]}"
