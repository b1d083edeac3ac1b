"""Spacing out the writes that only report progress.

While a job's workers start, every pod event changes ``replicaStatuses`` counts and the list of Running
workers in ``discover_hosts.sh``. Writing each change costs an API write per wave of pods. Such
progress-only writes of one job are spaced at least ``interval`` seconds apart: a postponed write is
made by a sync the settler schedules, so the stored status is exact again within ``interval``.
Condition changes, times, the hostfile and everything else are written at once.

The ConfigMap also waits for the Running workers to settle (``settle``): a ConfigMap update is sent by
every kubelet to every pod that mounts it, so while workers keep starting the list is written once they
have stopped changing for ``interval``, and at the latest ``SETTLE_LIMIT`` intervals after the first
unwritten change.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

Requeue = Callable[[str, float], None]
SETTLE_LIMIT = 3  # intervals a settling write waits at most after the first change it carries


@dataclass
class _Pending:
    """An unwritten progress change: when it was first seen, and when its content last changed."""

    first: float
    changed: float
    content: object


@dataclass
class SettleMemory:
    """One job's progress writes, by what was written ("status", "config"): when each was last written, and
    the change of each not written yet. It lives in the job's record and goes with it."""

    last: dict[str, float] = field(default_factory=dict)
    pending: dict[str, _Pending] = field(default_factory=dict)


class Settler:
    """The spacing rule and the requeue it schedules; what it remembers of a job is the job's ``SettleMemory``."""

    def __init__(self, interval: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval, self.clock = interval, clock
        self.requeue: Requeue = lambda key, delay: None

    def postpone(self, key: str, memory: SettleMemory, what: str) -> bool:
        """True (and a sync scheduled) when a progress write of ``what`` must wait; False to write now."""
        if self.interval <= 0:
            return False
        return self._wait(key, self._spaced(memory, what))

    def settle(self, key: str, memory: SettleMemory, what: str, content: object, *, capped: bool = True) -> bool:
        """As ``postpone``, and the write of ``content`` also waits until it has not changed for ``interval``
        (at most ``SETTLE_LIMIT`` intervals after the first change seen, unless not ``capped``: then only
        until it is quiet, and the caller decides when a change is large enough to be written anyway)."""
        if self.interval <= 0:
            return False
        now = self.clock()
        pending = memory.pending.get(what)
        if pending is None:
            pending = memory.pending[what] = _Pending(now, now, content)
        elif pending.content != content:
            pending.changed, pending.content = now, content
        quiet = pending.changed + self.interval
        if capped:
            quiet = min(quiet, pending.first + SETTLE_LIMIT * self.interval)
        return self._wait(key, max(self._spaced(memory, what), quiet))

    def _spaced(self, memory: SettleMemory, what: str) -> float:
        """The earliest moment ``interval`` after the last write of ``what``."""
        last = memory.last.get(what)
        return float("-inf") if last is None else last + self.interval

    def _wait(self, key: str, due: float) -> bool:
        wait = due - self.clock()
        if wait <= 0:
            return False
        self.requeue(key, wait)
        return True

    def wrote(self, memory: SettleMemory, what: str) -> None:
        memory.last[what] = self.clock()
        memory.pending.pop(what, None)

    @staticmethod
    def up_to_date(memory: SettleMemory, what: str) -> None:
        """Nothing of ``what`` is left to write (the change was undone): a later change starts afresh."""
        memory.pending.pop(what, None)
