"""Plugins for every tier (the end-of-run time, skip and figure summaries, the required-tier check), and the
groups in which `make test` runs the tiers side by side (pytest-xdist, ``--dist loadgroup``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ("tests.skip_summary", "tests.run_figures")

HERE = Path(__file__).resolve().parent
WHOLE_TIERS = ("e2e",)
"""Tiers that run in one worker from start to end: the real node is one per machine (its tests share one node)."""
FIRST = ("e2e", "faults", "integration")
"""The longest tiers start first, so that the short ones fill the gaps at the end."""


def group_of(path: Path) -> tuple[str, str]:
    """(tier, group) of a test file: a whole tier for ``WHOLE_TIERS``, else one group per module (its module-scoped
    fixtures, such as an operator it starts, are set up once)."""
    parts = path.resolve().relative_to(HERE).parts
    tier = parts[0] if len(parts) > 1 else ""
    return tier, tier if tier in WHOLE_TIERS else f"{tier}/{path.stem}"


def _rank(tier: str) -> int:
    return FIRST.index(tier) if tier in FIRST else len(FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test joins its group (``xdist_group``); the longest tiers first, each tier's own order kept."""
    tiers = {}
    for item in items:
        tier, group = group_of(Path(item.path))
        tiers[item.nodeid] = tier
        item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: _rank(tiers[item.nodeid]))
