"""Upstream's example MPIJobs, from the read-only reference folder ``shared/`` beside the checkout (CI has it), or,
where it is absent (a newcomer's clone), the project's own copies of upstream's pi examples in ``examples/``: the
same jobs but for names, so every test that runs upstream's examples still runs, on the real node too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

REFERENCE = Path(__file__).resolve().parents[2] / "shared"
UPSTREAM_EXAMPLES = REFERENCE / "upstream" / "examples"
PROJECT_EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# upstream's examples/v2beta1/pi/<file> -> the project's copy of it
PROJECT_PI = {"pi.yaml": "pi-openmpi.yaml", "pi-intel.yaml": "pi-intel.yaml", "pi-mpich.yaml": "pi-mpich.yaml"}


def has_upstream_examples() -> bool:
    return UPSTREAM_EXAMPLES.is_dir()


def upstream_example_paths() -> list[Path]:
    """Every upstream example, or the project's copies of upstream's pi examples when the reference is absent."""
    if has_upstream_examples():
        return sorted(UPSTREAM_EXAMPLES.rglob("*.yaml"))
    return [PROJECT_EXAMPLES / name for name in PROJECT_PI.values()]


def pi_example(file: str) -> Path:
    """Upstream's ``examples/v2beta1/pi/<file>`` (pi.yaml, pi-intel.yaml, pi-mpich.yaml), or the project's copy."""
    if has_upstream_examples():
        return UPSTREAM_EXAMPLES / "v2beta1" / "pi" / file
    return PROJECT_EXAMPLES / PROJECT_PI[file]


def load_example(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def example_params() -> list[Any]:
    """pytest params, one per upstream example (ids ``v2beta1/pi/pi.yaml``), or one per project copy (ids
    ``project/pi-openmpi.yaml``) when the reference folder is absent."""
    if has_upstream_examples():
        return [pytest.param(p, id=str(p.relative_to(UPSTREAM_EXAMPLES))) for p in upstream_example_paths()]
    return [pytest.param(p, id=f"project/{p.name}") for p in upstream_example_paths()]
