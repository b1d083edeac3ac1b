"""A pytest plugin (loaded by tests/conftest.py): figures that tests record (``add(section, line)``) are printed
in sections at the end of the run. When the tiers run side by side (``make test``: pytest-xdist workers), each
worker hands its figures to the main process, which prints them all."""

from __future__ import annotations

import pytest

SECTIONS: dict[str, list[str]] = {}
"""Section title -> its lines, in the order they were added (this process's figures)."""

WORKER_OUTPUT_KEY = "figures"


def add(section: str, line: str) -> None:
    """A figure line for the end-of-run summary, under ``section``."""
    SECTIONS.setdefault(section, []).append(line)


def merge(sections: dict[str, list[str]]) -> None:
    for title, lines in sections.items():
        SECTIONS.setdefault(title, []).extend(lines)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a worker: hand the figures (recorded by tests and by other plugins' sessionfinish) to the main process."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output[WORKER_OUTPUT_KEY] = SECTIONS


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """In the main process: a worker finished; keep its figures."""
    merge(getattr(node, "workeroutput", {}).get(WORKER_OUTPUT_KEY, {}))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for title, lines in SECTIONS.items():
        terminalreporter.section(title)
        for line in lines:
            terminalreporter.write_line(line)
