"""The work queue: dedup, one worker per key, processing-time adds, backoff and coalescing."""

from __future__ import annotations

import asyncio

import pytest

from reconciler.runtime.workqueue import WorkQueue


async def test_a_key_is_queued_once() -> None:
    queue = WorkQueue()
    for _ in range(5):
        queue.add("ns/a")
    queue.add("ns/b")
    assert len(queue) == 2
    assert [await queue.get(), await queue.get()] == ["ns/a", "ns/b"]


async def test_a_key_added_while_processing_waits_for_done() -> None:
    queue = WorkQueue()
    queue.add("ns/a")
    key = await queue.get()
    queue.add("ns/a")  # an event arrives during the sync
    assert len(queue) == 0, "never handed to a second worker while the first holds it"
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not getter.done()
    queue.done(key)
    assert await asyncio.wait_for(getter, 1) == "ns/a"


async def test_workers_never_hold_the_same_key_together() -> None:
    queue = WorkQueue()
    holding: set[str] = set()
    overlaps = 0
    processed = 0

    async def worker() -> None:
        nonlocal overlaps, processed
        while processed < 200:
            key = await queue.get()
            if key in holding:
                overlaps += 1
            holding.add(key)
            await asyncio.sleep(0)
            holding.discard(key)
            processed += 1
            queue.done(key)
            queue.add(key)

    for key in ("a", "b", "c"):
        queue.add(key)
    tasks = [asyncio.create_task(worker()) for _ in range(4)]
    await asyncio.wait_for(asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED), 5)
    for task in tasks:
        task.cancel()
    assert overlaps == 0
    assert processed >= 200


def test_backoff_is_exponential_per_key_and_forget_resets_it() -> None:
    queue = WorkQueue(rate=1000, burst=1000, base_delay=0.005, max_delay=1.0)
    assert [queue.when("ns/a") for _ in range(4)] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    assert queue.when("ns/b") == pytest.approx(0.005)
    for _ in range(20):
        queue.when("ns/a")
    assert queue.when("ns/a") == pytest.approx(1.0), "capped at max_delay"
    queue.forget("ns/a")
    assert queue.when("ns/a") == pytest.approx(0.005)


def test_the_global_bucket_bounds_retries() -> None:
    queue = WorkQueue(rate=10, burst=2, base_delay=0.001)
    delays = [queue.when(f"ns/{i}") for i in range(4)]
    assert delays[:2] == pytest.approx([0.001, 0.001])
    assert delays[2] == pytest.approx(0.1, abs=0.02)
    assert delays[3] == pytest.approx(0.2, abs=0.02)


async def test_delayed_adds_of_a_key_coalesce() -> None:
    queue = WorkQueue()
    for _ in range(10):
        queue.add_after("ns/a", 0.05)
    assert len(queue) == 0
    assert queue.scheduled("ns/a")
    assert await asyncio.wait_for(queue.get(), 1) == "ns/a"
    queue.done("ns/a")
    assert len(queue) == 0
    assert not queue.scheduled("ns/a"), "ten events in the window made one sync"


def test_a_sub_millisecond_delay_under_uvloop_coalesces() -> None:
    """uvloop answers call_later(0.0004) with a plain Handle (the delay rounds to 0 ms), which has no when():
    a second add of the key then crashed the worker and stopped the controller."""
    uvloop = pytest.importorskip("uvloop")

    async def main() -> list[str]:
        queue = WorkQueue()
        queue.add_after("ns/a", 0.0004)
        queue.add_after("ns/a", 0.0004)
        queue.add_after("ns/a", 1.0)
        got = [await asyncio.wait_for(queue.get(), 1)]
        queue.done("ns/a")
        queue.shutdown()
        return got

    assert uvloop.run(main()) == ["ns/a"]
