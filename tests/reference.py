"""The read-only reference folder ``shared/`` beside the checkout (absent on a user's machine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

REFERENCE = Path(__file__).resolve().parents[2] / "shared"
UPSTREAM_EXAMPLES = REFERENCE / "upstream" / "examples"

needs_reference = pytest.mark.skipif(
    not UPSTREAM_EXAMPLES.is_dir(),
    reason=f"the reference folder with upstream's examples ({UPSTREAM_EXAMPLES}) is not beside this checkout",
)


def upstream_example_paths() -> list[Path]:
    return sorted(UPSTREAM_EXAMPLES.rglob("*.yaml")) if UPSTREAM_EXAMPLES.is_dir() else []


def load_example(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def example_params() -> list[Any]:
    """pytest params, one per upstream example, or one skipped param when the folder is absent."""
    paths = upstream_example_paths()
    if not paths:
        return [pytest.param(None, marks=needs_reference, id="no-upstream-examples")]
    return [pytest.param(p, id=str(p.relative_to(UPSTREAM_EXAMPLES))) for p in paths]
