"""Budgets and figures of the fuzz runs: examples run, seconds, peak RSS, printed after the session."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

SHORT = int(os.environ.get("MPIJOB_FUZZ_SHORT", "600"))
"""Examples per fuzz test in `make test` (about 1.5-2k in all)."""
FULL = int(os.environ.get("MPIJOB_FUZZ_FULL", "10000"))
"""Examples per fuzz test in `make faults`: 10,000 through the webhook over HTTP, as many through the API."""

BUDGETS = [pytest.param(SHORT, id="short"),
           pytest.param(FULL, id="full", marks=[pytest.mark.faults, pytest.mark.timeout(3600)])]


@dataclass
class Figure:
    name: str
    examples: int
    seconds: float
    peak_rss_mib: float
    extra: dict[str, int | float | str] = field(default_factory=dict)

    def line(self) -> str:
        more = "".join(f" {k}={v}" for k, v in self.extra.items())
        return (f"{self.name}: examples={self.examples} seconds={self.seconds:.1f} "
                f"peak_rss_mib={self.peak_rss_mib:.0f}{more}")


FIGURES: list[Figure] = []


def fuzz_settings(examples: int) -> settings:
    """No deadline (wall-clock is not a property), no example database in the tree, no slowness checks."""
    return settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                    phases=[Phase.explicit, Phase.generate, Phase.shrink],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])


_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def reset_peak_rss() -> None:
    """Reset the process's peak RSS (Linux: writing 5 to clear_refs), so a peak measures one case."""
    with suppress(OSError):
        _CLEAR_REFS.write_text("5")


def peak_rss_mib() -> float:
    """Peak resident memory since the last reset (VmHWM), else since the start of the process."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mib() -> float:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class Counter:
    examples: int = 0
    extra: dict[str, int | float | str] = field(default_factory=dict)

    def count(self, key: str) -> None:
        value = self.extra.get(key, 0)
        assert isinstance(value, int)
        self.extra[key] = value + 1


@contextmanager
def measured(name: str) -> Iterator[Counter]:
    """Record examples, time and peak RSS of the block as a figure."""
    counter = Counter()
    reset_peak_rss()
    started = time.perf_counter()
    yield counter
    FIGURES.append(Figure(name, counter.examples, time.perf_counter() - started, peak_rss_mib(), counter.extra))


def timed(function: Callable[[], object]) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of one call."""
    reset_peak_rss()
    started = time.perf_counter()
    function()
    return time.perf_counter() - started, peak_rss_mib()
