"""Waiting on a condition with a deadline: the only way the harness (and its tests) wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class HarnessError(RuntimeError):
    """The local control plane could not be started, reached or stopped as asked."""


class WaitTimeoutError(HarnessError, TimeoutError):
    """A condition did not hold before its deadline."""


def wait_for(predicate: Callable[[], T], timeout: float, interval: float = 0.2, *, what: str = "condition",
             ignore: tuple[type[BaseException], ...] = ()) -> T:
    """Call `predicate` every `interval` seconds until it returns a truthy value, and return that value.

    Raises WaitTimeoutError after `timeout` seconds, naming `what` and the last value or ignored exception seen.
    Exceptions of the `ignore` types count as "not yet"; any other exception propagates at once (use that
    for fatal conditions such as a dead process).
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = predicate()
        except ignore as exc:
            last = exc
        else:
            if value:
                return value
            last = value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeoutError(f"timed out after {timeout:.1f}s waiting for {what} (last: {last!r})")
        time.sleep(min(interval, remaining))
