"""Leadership terms (issue 29): a lost Lease ends the term in-process. The controller's tasks are cancelled and
awaited before anything else happens, the term's caches, queue and bookkeeping are dropped, and the process
campaigns again; the next term starts afresh. A fatal controller error still exits (1); SIGTERM releases."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from prometheus_client import CollectorRegistry

from reconciler.__main__ import Terms, _lead
from reconciler.mpijob.metrics import OperatorMetrics
from reconciler.options import parse_options
from reconciler.runtime.client import KubeClient
from reconciler.runtime.health import Health
from reconciler.runtime.informer import FatalWatchError
from reconciler.runtime.leader import LeaderElector
from tests.unit.reconciler.test_client import Configuration


class Elector:
    """Our LeaderElector seam: ``acquire`` leads at once; ``keep`` returns (Lease lost) when ``lose`` is set."""

    identity = "me"

    def __init__(self, log: list[str]) -> None:
        self.log, self.leading, self.lose = log, asyncio.Event(), asyncio.Event()
        self.acquired = 0
        self.released = False

    async def acquire(self) -> None:
        self.acquired += 1
        self.log.append(f"acquired {self.acquired}")
        self.leading.set()

    async def keep(self) -> None:
        await self.lose.wait()
        self.lose.clear()
        self.leading.clear()
        self.log.append("lost")

    async def release(self) -> None:
        self.released = True

    def problem(self) -> str | None:
        return None

    def readiness(self) -> str | None:
        return None


class Controller:
    """Runs until cancelled, then takes a moment to wind down (syncs in flight), or fails with ``error``."""

    def __init__(self, number: int, log: list[str], error: BaseException | None) -> None:
        self.number, self.log, self.error = number, log, error
        self.informers: list[Any] = []
        self.running = asyncio.Event()

    async def run(self) -> None:
        self.log.append(f"term {self.number} runs")
        self.running.set()
        try:
            if self.error is not None:
                raise self.error
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)
            self.log.append(f"term {self.number} wound down")
            raise


class FakeTerms:
    def __init__(self, log: list[str], error: BaseException | None = None) -> None:
        self.log, self.error = log, error
        self.current: Controller | None = None
        self.made: list[Controller] = []
        self.count = 0

    def begin(self) -> Controller:
        self.count += 1
        self.current = Controller(self.count, self.log, self.error)
        self.made.append(self.current)
        return self.current

    async def end(self) -> None:
        self.log.append(f"term {self.count} dropped")
        self.current = None


def lead(terms: FakeTerms, elector: Elector, stop: asyncio.Event) -> asyncio.Task[int]:
    metrics = OperatorMetrics(CollectorRegistry())
    return asyncio.create_task(_lead(cast(Terms, terms), cast(LeaderElector, elector), Health(), metrics, stop))


async def test_a_lost_lease_ends_the_term_and_the_process_campaigns_again() -> None:
    log: list[str] = []
    terms, elector, stop = FakeTerms(log), Elector(log), asyncio.Event()
    leading = lead(terms, elector, stop)
    await asyncio.wait_for(_running(terms, 1), 5)
    elector.lose.set()
    await asyncio.wait_for(_running(terms, 2), 5)
    stop.set()
    assert await asyncio.wait_for(leading, 5) == 0
    assert log == ["acquired 1", "term 1 runs", "lost", "term 1 wound down", "term 1 dropped",
                   "acquired 2", "term 2 runs", "term 2 wound down", "term 2 dropped"]
    assert elector.released
    assert terms.made[0] is not terms.made[1]


async def test_a_fatal_controller_error_still_exits() -> None:
    log: list[str] = []
    terms = FakeTerms(log, FatalWatchError("pods: 403 Forbidden"))
    elector = Elector(log)
    assert await asyncio.wait_for(lead(terms, elector, asyncio.Event()), 5) == 1
    assert elector.acquired == 1
    assert not elector.released


async def _running(terms: FakeTerms, count: int) -> None:
    while len(terms.made) < count:  # noqa: ASYNC110  (the fake has no event for it)
        await asyncio.sleep(0.01)
    await terms.made[count - 1].running.wait()


async def test_each_term_has_its_own_caches_queue_and_bookkeeping() -> None:
    metrics = OperatorMetrics(CollectorRegistry())
    client = KubeClient(Configuration("http://127.0.0.1:1"), qps=0, burst=1)
    terms = Terms(client, metrics, parse_options(["--kubeConfig=/nonexistent"]))
    first = terms.begin()
    job = {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "1", "uid": "u"}}
    first.reconciler.shared.caches.mpijobs.put(job)
    first.reconciler.shared.book.record("u").expectations.created("ns", "a-worker-0")
    first.queue.add("ns/a")
    assert [j["metadata"]["name"] for j in terms] == ["a"]
    assert metrics.registry.get_sample_value("mpi_operator_workqueue_depth") == 1.0
    await terms.end()
    assert list(terms) == []
    second = terms.begin()
    assert second is not first
    assert len(second.reconciler.shared.caches.mpijobs) == 0
    assert len(second.reconciler.shared.book) == 0, "no job's record"
    assert len(second.queue) == 0
    assert metrics.registry.get_sample_value("mpi_operator_workqueue_depth") == 0.0
    second.reconciler.shared.settler.requeue("ns/a", 1.0)  # through the job's window (controller.py): this queue's
    assert second.queue.scheduled("ns/a")
    assert not first.queue.scheduled("ns/a")
    assert second.reconciler.shared.requeue == second.queue.add_after
    assert second.reconciler.metrics is metrics
    await terms.end()
