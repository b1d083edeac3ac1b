"""Fuzz tests (hypothesis): the webhook over HTTP and the shared API package. `make test` runs the short
budget; `make faults` (`pytest -m faults`) the full one. Figures are printed at the end of the session."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests import run_figures
from tests.fuzz.figures import FIGURES
from tests.webhook.conftest import Client
from webhook.app import create_app


@pytest.fixture
async def client(aiohttp_client: Callable[..., Awaitable[Client]]) -> Client:
    """The webhook application as `python -m webhook` builds it (default body limit), on a test server."""
    return await aiohttp_client(create_app())


def pytest_sessionfinish(session: pytest.Session) -> None:
    """This process's fuzz figures, for the end-of-run summary (tests/run_figures.py)."""
    for figure in FIGURES:
        run_figures.add("fuzz figures", figure.line())
