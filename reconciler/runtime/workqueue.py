"""A work queue of ``namespace/name`` keys, like client-go's rate-limited queue.

A key is queued at most once and is never handed to two workers at once: a key added while it is
being processed is processed again afterwards. Retries wait the larger of a per-key exponential
backoff and a global token bucket. Watch events use plain ``add`` so that a burst of pod events
costs one sync, not one token each.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from reconciler.runtime.ratelimit import TokenBucket


class WorkQueue:
    def __init__(self, rate: float = 10.0, burst: int = 100, base_delay: float = 0.005, max_delay: float = 1000.0):
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._failures: dict[str, int] = {}
        self._ready = asyncio.Condition()
        self._bucket = TokenBucket(rate, burst)
        self.base_delay, self.max_delay = base_delay, max_delay
        # key -> (the loop time it fires at, its handle): uvloop answers a call_later whose delay rounds to
        # 0 ms with a plain Handle, which has no when()
        self._timers: dict[str, tuple[float, asyncio.Handle]] = {}
        self._queued_at: dict[str, float] = {}
        self.clock: Callable[[], float] = time.monotonic
        # told how long each key taken waited in the queue, and of each rate-limited retry (the metrics)
        self.on_wait: Callable[[float], None] = lambda _: None
        self.on_retry: Callable[[], None] = lambda: None

    def add(self, key: str) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._enqueue(key)

    def _enqueue(self, key: str) -> None:
        self._queue.append(key)
        self._queued_at[key] = self.clock()
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._ready:
            self._ready.notify()

    def when(self, key: str) -> float:
        """The delay before retrying ``key``, counting this failure."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        backoff: float = min(self.base_delay * 2.0**failures, self.max_delay)
        return max(backoff, self._bucket.reserve())

    def add_rate_limited(self, key: str) -> None:
        self.on_retry()
        self.add_after(key, self.when(key))

    def add_after(self, key: str, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds; an earlier pending add of the key stands (bursts coalesce)."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        pending = self._timers.get(key)
        deadline = loop.time() + delay
        if pending is not None and pending[0] <= deadline:
            return
        if pending is not None:
            pending[1].cancel()
        self._timers[key] = (deadline, loop.call_later(delay, self._fire, key))

    def scheduled(self, key: str) -> bool:
        """True while a delayed add of ``key`` is pending."""
        return key in self._timers

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def retries(self, key: str) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> str:
        async with self._ready:
            await self._ready.wait_for(lambda: bool(self._queue))
            key = self._queue.popleft()
        self.on_wait(self.clock() - self._queued_at.pop(key))
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._enqueue(key)

    def __len__(self) -> int:
        return len(self._queue)

    def shutdown(self) -> None:
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
