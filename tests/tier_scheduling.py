"""A pytest plugin (loaded by tests/conftest.py): how `make test` runs the tiers side by side in pytest-xdist
workers (``-n 3 --dist loadscope``). Each scope goes to one worker as a whole: the e2e tier is one scope (one real
node per machine, its tests share it), every other test file is a scope of its own (its module fixtures, such as an
operator it starts, are set up once). Scopes start in collection order, which ``pytest_collection_modifyitems`` sets:
the longest tiers first, so that the short ones fill the gaps at the end.

pytest-xdist's own ``--dist loadgroup`` (``xdist_group`` marks) cannot do this with pytest 9: it renames the items'
node ids through an attribute pytest no longer reads, so every test would be a scope of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

TESTS = Path(__file__).resolve().parent
WHOLE_TIERS = ("e2e",)
"""Tiers that run in one worker from start to end."""
FIRST = ("e2e", "faults", "integration")
"""The longest tiers, started first in this order."""


def tier_of(file: str) -> str:
    """``tests/e2e/test_pi.py`` -> ``e2e``; ``""`` for a file outside a tier folder."""
    parts = file.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else ""


def scope_of(nodeid: str) -> str:
    """The scope of a test: its tier for ``WHOLE_TIERS``, else its file."""
    file = nodeid.split("::", maxsplit=1)[0]
    return tier_of(file) if tier_of(file) in WHOLE_TIERS else file


def rank(nodeid: str) -> int:
    tier = tier_of(nodeid.split("::", maxsplit=1)[0])
    return FIRST.index(tier) if tier in FIRST else len(FIRST)


class TierScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist is untyped
    """xdist's scope scheduling, with ``scope_of`` as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> TierScheduling | None:
    return TierScheduling(config, log) if config.getvalue("dist") == "loadscope" else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest tiers first, each tier's own order kept (the sort is stable)."""
    items.sort(key=lambda item: rank(item.nodeid))
