"""A pytest plugin (loaded by tests/conftest.py): at the end of a run, the time each tier took and the ten
slowest tests (setup, call and teardown added up, so a session fixture's start-up counts for the first test that
used it), then one line naming every tier or test file that was skipped, and why. With
``REQUIRE_TIERS=unit,integration,...`` a required tier in which no test ran (every test skipped, or none selected)
fails the session, as CI (``.ci/run``) asks.

A tier is a folder under ``tests/`` (unit, webhook, fuzz, integration, e2e, faults). A test counts as run
when it passed, failed or errored; a skip (at collection, setup or in the test) counts as skipped, an
expected failure as run. Deselection (``-m 'not faults'``) is neither: a deselected test was not asked for.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pytest

REQUIRE_ENV = "REQUIRE_TIERS"


@dataclass
class Outcomes:
    """What each test (or each test file skipped at collection) did, by node id."""

    ran: set[str] = field(default_factory=set)
    skipped: dict[str, str] = field(default_factory=dict)  # node id -> reason

    def record(self, nodeid: str, *, skipped: bool, reason: str = "") -> None:
        if skipped:
            self.skipped.setdefault(nodeid, reason)
        else:
            self.ran.add(nodeid)

    def tiers(self) -> dict[str, Tier]:
        """Per tier (``""`` for tests outside a tier folder): how many tests ran, and its skips by file. A
        test that was skipped is not counted as run (its teardown may still have reported)."""
        result: dict[str, Tier] = {}
        for nodeid in self.ran - self.skipped.keys():
            result.setdefault(tier_of(nodeid), Tier()).ran += 1
        for nodeid, reason in self.skipped.items():
            result.setdefault(tier_of(nodeid), Tier()).skips.setdefault(file_of(nodeid), []).append(reason)
        return result


@dataclass
class Tier:
    ran: int = 0
    skips: dict[str, list[str]] = field(default_factory=dict)  # file -> the reason of each skip in it

    def reasons(self) -> str:
        """``3 tests: reason one | reason two``: how many skips, and their distinct reasons."""
        reasons = [reason for file_reasons in self.skips.values() for reason in file_reasons]
        return _reasons(reasons)


def file_of(nodeid: str) -> str:
    return nodeid.split("::", maxsplit=1)[0]


def tier_of(nodeid: str) -> str:
    """``tests/e2e/test_pi.py::test_x`` -> ``e2e``; ``""`` for a test that is not in a tier folder."""
    parts = file_of(nodeid).split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else ""


def skip_reason(longrepr: object) -> str:
    """The reason of a skip report (pytest gives (path, line, "Skipped: reason"))."""
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def _reasons(reasons: list[str]) -> str:
    distinct = list(dict.fromkeys(reasons))
    return f"{len(reasons)} test{'s' * (len(reasons) != 1)}: " + " | ".join(distinct)


def skip_line(outcomes: Outcomes) -> str:
    """``skipped: tests/e2e (all 12 tests: no real node here: ...); tests/unit/test_crd.py (1 test: ...)``: a tier
    in which nothing ran is named as a whole, otherwise each file with skips; ``skipped: nothing`` if none."""
    entries = []
    for name, tier in sorted(outcomes.tiers().items()):
        if name and tier.skips and tier.ran == 0:
            entries.append(f"tests/{name} (all {tier.reasons()})")
        else:
            entries.extend(f"{path} ({_reasons(reasons)})" for path, reasons in sorted(tier.skips.items()))
    return "skipped: " + ("; ".join(entries) if entries else "nothing")


def required_tiers(environ: Mapping[str, str]) -> list[str]:
    return [name.strip() for name in environ.get(REQUIRE_ENV, "").split(",") if name.strip()]


def missing_tiers(outcomes: Outcomes, required: Iterable[str]) -> dict[str, str]:
    """Each required tier in which no test ran, with why: its skips, or that no test of it ran at all."""
    tiers = outcomes.tiers()
    missing = {}
    for name in required:
        tier = tiers.get(name, Tier())
        if tier.ran == 0:
            missing[name] = tier.reasons() if tier.skips else "no test ran"
    return missing


SLOWEST = 10


def _seconds(total: float) -> str:
    if total < 10:
        return f"{total:.1f} s"
    return f"{total:.0f} s" if total < 600 else f"{total / 60:.1f} min"


def time_lines(durations: Mapping[str, float], slowest: int = SLOWEST) -> list[str]:
    """``time by tier: e2e 12.5 min, unit 61 s`` and the `slowest` tests, longest first, from seconds by node id."""
    if not durations:
        return []
    tiers: dict[str, float] = {}
    for nodeid, took in durations.items():
        tiers[tier_of(nodeid) or "(no tier)"] = tiers.get(tier_of(nodeid) or "(no tier)", 0.0) + took
    by_tier = ", ".join(f"{name} {_seconds(took)}" for name, took in sorted(tiers.items(), key=lambda t: -t[1]))
    longest = sorted(durations.items(), key=lambda item: (-item[1], item[0]))[:slowest]
    return [f"time by tier: {by_tier}", f"slowest {len(longest)} tests:",
            *(f"  {_seconds(took):>9}  {nodeid}" for nodeid, took in longest)]


class SkipSummary:
    """The plugin: records every report, says where the time went and what was skipped, and fails the session
    when a required tier did not run."""

    def __init__(self, required: list[str]) -> None:
        self.outcomes, self.required = Outcomes(), required
        self.durations: dict[str, float] = {}  # node id -> seconds of setup, call and teardown

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        if report.skipped and not hasattr(report, "wasxfail"):
            self.outcomes.record(report.nodeid, skipped=True, reason=skip_reason(report.longrepr))
        elif report.when == "call" or report.failed or hasattr(report, "wasxfail"):
            self.outcomes.record(report.nodeid, skipped=False)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped:
            self.outcomes.record(report.nodeid, skipped=True, reason=skip_reason(report.longrepr))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if missing_tiers(self.outcomes, self.required) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        for line in time_lines(self.durations):
            terminalreporter.write_line(line)
        terminalreporter.write_line(skip_line(self.outcomes), yellow=bool(self.outcomes.skipped))
        missing = missing_tiers(self.outcomes, self.required)
        if missing:
            terminalreporter.write_line(
                f"{REQUIRE_ENV}={','.join(self.required)}: no test ran in "
                + "; ".join(f"tests/{name} ({why})" for name, why in missing.items()), red=True)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SkipSummary(required_tiers(os.environ)), "skip-summary")
