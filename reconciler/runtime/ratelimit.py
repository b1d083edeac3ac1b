"""Token buckets (client-go's ``flowcontrol`` and the work queue's global limiter)."""

from __future__ import annotations

import asyncio
import time


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved; ``rate <= 0`` means unlimited."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._last = time.monotonic()

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now

    def reserve(self) -> float:
        """Take a token now and return how many seconds to wait before using it."""
        if self.rate <= 0:
            return 0.0
        self._refill()
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)
