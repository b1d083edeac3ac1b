"""Spacing out the writes that only report progress.

While a job's workers start, every pod event changes ``replicaStatuses`` counts and the list of Running
workers in ``discover_hosts.sh``. Writing each change costs an API write per wave of pods. Such
progress-only writes of one job are spaced at least ``interval`` seconds apart: a postponed write is
made by a sync the settler schedules, so the stored status is exact again within ``interval``.
Condition changes, times, the hostfile and everything else are written at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Requeue = Callable[[str, float], None]


class Settler:
    def __init__(self, interval: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval, self.clock = interval, clock
        self.requeue: Requeue = lambda key, delay: None
        self._last: dict[tuple[str, str], float] = {}

    def postpone(self, key: str, uid: str, what: str) -> bool:
        """True (and a sync scheduled) when a progress write of ``what`` must wait; False to write now."""
        if self.interval <= 0:
            return False
        last = self._last.get((uid, what))
        wait = 0.0 if last is None else last + self.interval - self.clock()
        if wait <= 0:
            return False
        self.requeue(key, wait)
        return True

    def wrote(self, uid: str, what: str) -> None:
        self._last[(uid, what)] = self.clock()

    def forget(self, uid: str) -> None:
        for what in ("status", "config"):
            self._last.pop((uid, what), None)
