"""Fuzz tests (hypothesis): the webhook over HTTP and the shared API package. `make test` runs the short
budget; `make faults` (`pytest -m faults`) the full one. Figures are printed at the end of the session."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests.fuzz.figures import FIGURES
from tests.webhook.conftest import Client
from webhook.app import create_app


@pytest.fixture
async def client(aiohttp_client: Callable[..., Awaitable[Client]]) -> Client:
    """The webhook application as `python -m webhook` builds it (default body limit), on a test server."""
    return await aiohttp_client(create_app())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not FIGURES:
        return
    terminalreporter.section("fuzz figures")
    for figure in FIGURES:
        terminalreporter.write_line(figure.line())
    total = sum(f.examples for f in FIGURES)
    terminalreporter.write_line(f"total examples: {total}")
