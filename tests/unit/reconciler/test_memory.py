"""Free C heap pages are given back to the operating system, periodically, until cancelled."""

from __future__ import annotations

import asyncio
import sys

import pytest

from reconciler.runtime import memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_released_after_a_burst_of_large_objects() -> None:
    burst = [bytes(1000) for _ in range(20_000)]  # larger than 512 bytes: malloc's, not Python's arenas
    del burst
    assert memory.release_free_memory()


async def test_periodic_release_runs_until_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[None] = []
    three = asyncio.Event()

    def release() -> bool:
        calls.append(None)
        if len(calls) == 3:
            three.set()
        return True

    monkeypatch.setattr(memory, "release_free_memory", release)
    task = asyncio.create_task(memory.release_periodically(0.01))
    await asyncio.wait_for(three.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
