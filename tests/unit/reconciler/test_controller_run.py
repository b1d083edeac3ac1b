"""``Controller.run``: informers and sync workers live and die together. A fatal informer error (a watch
refused with 401/403) cancels the workers, even one in the middle of a sync, and propagates, so that the
process exits loudly instead of syncing from a cache that no longer follows the cluster."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from reconciler.mpijob.caches import Caches
from reconciler.mpijob.controller import Controller
from reconciler.runtime.client import KubeClient
from reconciler.runtime.informer import FatalWatchError
from reconciler.runtime.workqueue import WorkQueue
from reconciler.settings import Settings


class Informer:
    """Our informer seam: syncs at once, then raises ``error`` when ``fail`` is set."""

    def __init__(self, plural: str, fail: asyncio.Event, error: BaseException | None = None, *,
                 syncs: bool = True) -> None:
        self.resource = SimpleNamespace(plural=plural)
        self.synced = asyncio.Event()
        self.fail, self.error, self.syncs = fail, error, syncs
        self.cancelled = False

    async def run(self) -> None:
        if self.syncs:
            self.synced.set()
        try:
            await self.fail.wait()
            if self.error is not None:
                raise self.error
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


class BlockingReconciler:
    """A sync that never ends unless cancelled, and says which of these happened."""

    def __init__(self) -> None:
        self.shared = SimpleNamespace(settler=SimpleNamespace(requeue=None), caches=Caches(), settings=Settings())
        self.started = asyncio.Event()
        self.cancelled: list[str] = []

    async def sync(self, key: str) -> str:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(key)
            raise
        return "done"


def controller_with(reconciler: BlockingReconciler, informers: list[Informer]) -> Controller:
    controller = Controller(cast(KubeClient, None), cast(Any, reconciler), WorkQueue(), threadiness=3)
    controller.informers = cast(Any, informers)
    return controller


def workers_left() -> list[asyncio.Task[Any]]:
    return [task for task in asyncio.all_tasks() if task.get_name().startswith("worker-") and not task.done()]


async def test_a_fatal_informer_error_cancels_the_workers_and_propagates() -> None:
    fail = asyncio.Event()
    error = FatalWatchError("pods: 403 Forbidden: pods is forbidden")
    informers = [Informer("mpijobs", fail), Informer("pods", fail, error)]
    reconciler = BlockingReconciler()
    controller = controller_with(reconciler, informers)
    controller.queue.add("ns/job")
    running = asyncio.create_task(controller.run())
    await asyncio.wait_for(reconciler.started.wait(), 5)
    fail.set()
    with pytest.raises(FatalWatchError, match="pods is forbidden"):
        await asyncio.wait_for(running, 5)
    assert reconciler.cancelled == ["ns/job"], "the sync in progress is cancelled"
    assert informers[0].cancelled, "the other informers are cancelled"
    assert workers_left() == []


async def test_a_fatal_informer_error_before_the_caches_sync_propagates() -> None:
    fail = asyncio.Event()
    fail.set()
    informers = [Informer("mpijobs", fail, syncs=False),
                 Informer("pods", fail, FatalWatchError("pods: 401 Unauthorized"), syncs=False)]
    reconciler = BlockingReconciler()
    with pytest.raises(FatalWatchError, match="401"):
        await asyncio.wait_for(controller_with(reconciler, informers).run(), 5)
    assert informers[0].cancelled
    assert not reconciler.started.is_set()
    assert workers_left() == []


async def test_cancelling_the_controller_cancels_informers_and_workers() -> None:
    fail = asyncio.Event()
    informers = [Informer("mpijobs", fail), Informer("pods", fail)]
    reconciler = BlockingReconciler()
    controller = controller_with(reconciler, informers)
    controller.queue.add("ns/job")
    running = asyncio.create_task(controller.run())
    await asyncio.wait_for(reconciler.started.wait(), 5)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert reconciler.cancelled == ["ns/job"]
    assert all(informer.cancelled for informer in informers)
    assert workers_left() == []
