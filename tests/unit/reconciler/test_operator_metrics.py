"""The reconciler's own metrics beside upstream's, exactly: start latency and duration from the written
timestamps, jobs pending and running at scrape time, reconcile errors by kind, the work queue's depth, wait and
retries."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from reconciler.mpijob.caches import Caches
from reconciler.mpijob.controller import Controller
from reconciler.mpijob.errors import ResourceExistsError
from reconciler.mpijob.metrics import OperatorMetrics, job_state
from reconciler.runtime.client import ApiError, KubeClient
from reconciler.runtime.workqueue import WorkQueue
from reconciler.settings import Settings
from shared.jsondict import JSONDict

CREATED = "2026-11-29T12:00:00Z"


def condition(kind: str, at: str, status: str = "True") -> JSONDict:
    return {"type": kind, "status": status, "lastTransitionTime": at, "lastUpdateTime": at}


def job(status: JSONDict | None = None, **run_policy: Any) -> JSONDict:
    return {"metadata": {"name": "j", "namespace": "n", "creationTimestamp": CREATED},
            "spec": {"runPolicy": run_policy}, "status": status or {}}


def histogram(registry: CollectorRegistry, name: str, label: str, value: str) -> tuple[float | None, float | None]:
    """(count, sum) of one labelled series."""
    labels = {label: value}
    return (registry.get_sample_value(f"{name}_count", labels), registry.get_sample_value(f"{name}_sum", labels))


def test_start_latency_and_duration_from_the_written_timestamps() -> None:
    metrics = OperatorMetrics(CollectorRegistry())
    registry = metrics.registry
    latency, duration = "mpi_operator_job_start_latency_seconds", "mpi_operator_job_duration_seconds"
    ready = {"startTime": CREATED, "conditions": [condition("WorkersReady", "2026-11-29T12:00:07Z")]}
    metrics.observe_written(job(), {}, ready)
    metrics.observe_written(job(), ready, ready)  # already True: not observed again
    assert histogram(registry, latency, "stage", "workers_ready") == (1.0, 7.0)
    assert histogram(registry, latency, "stage", "launcher_running") == (0.0, 0.0)
    running = {**ready, "conditions": [*ready["conditions"], condition("Running", "2026-11-29T12:00:12Z")]}
    metrics.observe_written(job(), ready, running)
    assert histogram(registry, latency, "stage", "launcher_running") == (1.0, 12.0)
    assert registry.get_sample_value(f"{latency}_bucket", {"stage": "launcher_running", "le": "10.0"}) == 0.0
    assert registry.get_sample_value(f"{latency}_bucket", {"stage": "launcher_running", "le": "20.0"}) == 1.0
    done = {**running, "startTime": "2026-11-29T12:00:02Z", "completionTime": "2026-11-29T12:05:02Z",
            "conditions": [*running["conditions"], condition("Succeeded", "2026-11-29T12:05:03Z")]}
    metrics.observe_written(job(), running, done)
    assert histogram(registry, duration, "outcome", "succeeded") == (1.0, 300.0)
    assert histogram(registry, duration, "outcome", "failed") == (0.0, 0.0)
    failed = {"conditions": [condition("Failed", "2026-11-29T12:01:00Z")]}  # no startTime: from the creation
    metrics.observe_written(job(), {}, failed)
    assert histogram(registry, duration, "outcome", "failed") == (1.0, 60.0)


@pytest.mark.parametrize(("the_job", "state"), [
    pytest.param(job(), "pending", id="new"),
    pytest.param(job({"conditions": [condition("Running", CREATED)]}), "running", id="running"),
    pytest.param(job({"conditions": [condition("Running", CREATED, "False")]}), "pending", id="not-running"),
    pytest.param(job({"conditions": [condition("Succeeded", CREATED)]}), None, id="succeeded"),
    pytest.param(job({"conditions": [condition("Failed", CREATED)]}), None, id="failed"),
    pytest.param(job(suspend=True), None, id="suspended"),
    pytest.param(job(managedBy="kueue.x-k8s.io/multikueue"), None, id="managed-elsewhere"),
    pytest.param(job(managedBy="kubeflow.org/mpi-operator"), "pending", id="managed-by-us"),
])
def test_job_state(the_job: JSONDict, state: str | None) -> None:
    assert job_state(the_job) == state


def test_jobs_pending_and_running_are_read_at_each_scrape() -> None:
    metrics = OperatorMetrics(CollectorRegistry())
    jobs: list[JSONDict] = []
    metrics.watch_jobs(jobs, lambda: datetime(2026, 11, 29, 12, 10, 0, tzinfo=UTC))

    def values() -> tuple[float | None, ...]:
        return tuple(metrics.registry.get_sample_value(f"mpi_operator_{name}")
                     for name in ("jobs_pending", "jobs_running", "jobs_pending_oldest_age_seconds"))

    assert values() == (0.0, 0.0, 0.0)
    jobs.extend([job(), job({"startTime": "2026-11-29T12:08:00Z"}),
                 job({"conditions": [condition("Running", CREATED)]}), job(suspend=True)])
    assert values() == (2.0, 1.0, 600.0)


class FailingReconciler:
    """A sync that raises the next of ``errors`` (or succeeds once they are spent)."""

    def __init__(self, errors: list[Exception], metrics: OperatorMetrics) -> None:
        self.shared = SimpleNamespace(settler=SimpleNamespace(requeue=None), caches=Caches(), settings=Settings())
        self.errors, self.metrics = errors, metrics

    async def sync(self, key: str) -> str:
        if self.errors:
            raise self.errors.pop(0)
        return "synced"


async def test_reconcile_errors_are_counted_by_kind() -> None:
    metrics = OperatorMetrics(CollectorRegistry())
    errors: list[Exception] = [ApiError(409, "Conflict", "stale"), ApiError(500, "InternalError", "etcd"),
                               ApiError(503, "ServiceUnavailable", "busy"), ResourceExistsError("x", "Pod"),
                               aiohttp.ClientConnectionError("refused"), ValueError("bug")]
    queue = WorkQueue()
    queue.on_retry = metrics.queue_retries.inc
    controller = Controller(cast(KubeClient, None), cast(Any, FailingReconciler(errors, metrics)), queue)
    for _ in range(7):
        await controller.process("default/test")
    queue.shutdown()
    assert {kind: metrics.registry.get_sample_value("mpi_operator_reconcile_errors_total", {"kind": kind})
            for kind in ("conflict", "api_error", "resource_exists", "unreachable", "internal")} == {
        "conflict": 1.0, "api_error": 2.0, "resource_exists": 1.0, "unreachable": 1.0, "internal": 1.0}
    assert metrics.registry.get_sample_value("mpi_operator_workqueue_retries_total") == 6.0


async def test_queue_depth_and_wait() -> None:
    metrics = OperatorMetrics(CollectorRegistry())
    queue = WorkQueue()
    now = [100.0]
    queue.clock, queue.on_wait = lambda: now[0], metrics.queue_wait.observe
    metrics.watch_queue(queue.__len__)
    queue.add("a/one")
    now[0] = 100.5
    queue.add("a/two")
    queue.add("a/one")  # already queued: its wait counts from the first add
    assert metrics.registry.get_sample_value("mpi_operator_workqueue_depth") == 2.0
    now[0] = 102.0
    assert await queue.get() == "a/one"
    assert await queue.get() == "a/two"
    assert metrics.registry.get_sample_value("mpi_operator_workqueue_depth") == 0.0
    assert metrics.registry.get_sample_value("mpi_operator_workqueue_queue_duration_seconds_count") == 2.0
    assert metrics.registry.get_sample_value("mpi_operator_workqueue_queue_duration_seconds_sum") == 3.5
    assert metrics.registry.get_sample_value("mpi_operator_workqueue_queue_duration_seconds_bucket",
                                             {"le": "1.0"}) == 0.0
    assert metrics.registry.get_sample_value("mpi_operator_workqueue_queue_duration_seconds_bucket",
                                             {"le": "5.0"}) == 2.0
    queue.done("a/one")
    queue.done("a/two")
    await asyncio.sleep(0)  # the notify tasks of the adds run
