"""The child-event window (controller.py): the events of a job's children within it share one sync, and the
window grows with the job's workers, so that a start costs about as many syncs at W = 10,000 as at 1,000
(each sync walks every worker). The settler's requeue waits the window too; the launcher of a
WaitForWorkersReady job is created within one window of its last worker turning Ready."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import cast

import pytest
from prometheus_client import CollectorRegistry

from reconciler.mpijob.context import Shared
from reconciler.mpijob.controller import Controller
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.mpijob.metrics import OperatorMetrics
from reconciler.mpijob.sync import Reconciler
from reconciler.runtime.api_resources import CONFIG_MAPS, JOBS, PODS
from reconciler.runtime.client import KubeClient
from reconciler.runtime.settle import Settler
from reconciler.runtime.workqueue import WorkQueue
from reconciler.settings import Settings
from shared.jsondict import JSONDict
from tests.unit.reconciler.test_config_map_writes import Clock, Due, every_worker
from tests.unit.reconciler.test_sync import EARLIER, KEYS, NOW, World, created_condition, new_mpijob


def controller_of(world: World, delay: float = 0.2) -> Controller:
    return Controller(cast(KubeClient, None), world.reconciler, WorkQueue(), child_event_delay=delay)


@pytest.mark.parametrize(("delay", "workers", "window"), [
    (0.2, 0, 0.2), (0.2, 1, 0.2), (0.2, 1000, 0.2), (0.2, 2000, 0.4), (0.2, 10_000, 2.0), (0.2, 25_000, 5.0),
    (0.2, 100_000, 5.0), (0.0, 10_000, 0.0), (8.0, 1, 8.0), (8.0, 10_000, 8.0)])
def test_the_window_grows_with_the_workers_up_to_its_bound(delay: float, workers: int, window: float) -> None:
    assert controller_of(World(), delay).window(new_mpijob(workers=workers)) == pytest.approx(window)


def test_a_job_without_a_worker_count_waits_the_delay() -> None:
    controller = controller_of(World())
    job = new_mpijob(workers=1)
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = "many"  # a stored job may hold anything
    assert controller.window(job) == 0.2
    assert controller.window(None) == 0.2


def scheduled_in(queue: WorkQueue, key: str) -> float:
    """Seconds until the queue's pending delayed add of ``key``."""
    return queue._timers[key][0] - asyncio.get_running_loop().time()


async def test_a_pod_event_of_a_large_job_waits_its_window_and_a_small_jobs_the_delay() -> None:
    world = World()
    controller = controller_of(world)
    for name, workers in (("small", 10), ("large", 10_000)):
        job = new_mpijob(name, workers=workers)
        world.cluster.given(MPIJOBS, job)
        pod = {"kind": "Pod", "metadata": {"name": f"{name}-worker-0", "namespace": "default", "resourceVersion": "1",
                                           "ownerReferences": [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                                                                "name": name, "uid": "job-uid", "controller": True}]}}
        controller._on_child(None, pod)
    assert 0.15 < scheduled_in(controller.queue, "default/small") <= 0.2
    assert 1.95 < scheduled_in(controller.queue, "default/large") <= 2.0
    controller.queue.shutdown()


async def test_the_settlers_requeue_waits_the_window_at_least() -> None:
    world = World()
    controller = controller_of(world)
    world.cluster.given(MPIJOBS, new_mpijob("large", workers=10_000))
    world.cluster.given(MPIJOBS, new_mpijob("small", workers=10))
    assert controller.progress_delay("default/large", 0.5) == pytest.approx(2.0)
    assert controller.progress_delay("default/large", 3.0) == 3.0
    assert controller.progress_delay("default/small", 0.5) == 0.5
    assert controller.progress_delay("default/gone", 0.5) == 0.5
    world.reconciler.shared.settler.requeue("default/large", 0.5)
    assert 1.95 < scheduled_in(controller.queue, "default/large") <= 2.0
    controller.queue.shutdown()


@dataclass
class Started:
    syncs: int
    launcher_after_last_ready: float  # seconds from the last worker Ready to the sync that created the launcher
    status: JSONDict
    discover_hosts: str


async def start(workers: int, spacing: float) -> Started:
    """A WaitForWorkersReady job whose workers (created, Pending) turn Running and Ready one by one, ``spacing``
    seconds apart, each publishing its name at once. A worker's event asks for a sync after the job's window,
    the settler's requeue after its delay (at least the window), the gating's requeue after its own delay; one
    pending sync per job, the earliest (workqueue.add_after), on a simulated clock."""
    clock, due = Clock(), Due()
    job = new_mpijob(workers=workers, launcherCreationPolicy="WaitForWorkersReady")
    job["status"] = {"conditions": [created_condition()], "startTime": EARLIER}
    world = World(job)
    settler = Settler(1.0, clock)
    world.reconciler = Reconciler(Shared(world.caches, world.cluster, Settings(), lambda: KEYS, settler=settler),
                                  OperatorMetrics(CollectorRegistry()), lambda: NOW)
    controller = controller_of(world)
    settler.requeue = lambda key, delay: due.add(clock.now + controller.progress_delay(key, delay))
    world.reconciler.shared.requeue = lambda key, delay: due.add(clock.now + delay)
    world.add_dependencies()
    world.add_workers(workers, "Pending")
    syncs, launcher_at = 0, None

    async def sync() -> None:
        nonlocal syncs, launcher_at
        world.publish_workers()
        await world.sync()
        syncs += 1
        for resource, name in ((CONFIG_MAPS, "test-config"), (MPIJOBS, "test"), (JOBS, "test-launcher")):
            if (stored := world.cluster.server.get((resource.plural, "default", name))) is not None:
                world.cluster.given(resource, stored)  # the informers catch up
                launcher_at = clock.now if resource is JOBS and launcher_at is None else launcher_at

    await sync()
    started = clock.now
    for index in range(workers):
        at = started + index * spacing
        while due.at is not None and due.at <= at:
            clock.now = max(clock.now, due.take())
            await sync()
        clock.now = at
        world.add_workers(1, "Running", ready=True, start=index, published=False)
        due.add(clock.now + controller.window(job))  # the pod's event
    last_ready = clock.now
    while due.at is not None:
        clock.now = max(clock.now, due.take())
        await sync()
    assert launcher_at is not None, "the launcher was created"
    stored = world.cluster.server[(MPIJOBS.plural, "default", "test")]
    hosts = world.cluster.server[(CONFIG_MAPS.plural, "default", "test-config")]["data"]["discover_hosts.sh"]
    assert len([key for key in world.cluster.server if key[0] == PODS.plural]) == workers
    return Started(syncs, launcher_at - last_ready, stored["status"], hosts)


@pytest.mark.parametrize(("workers", "syncs"), [(1000, 52), (5000, 51)])
async def test_a_start_takes_as_many_syncs_at_5000_workers_as_at_1000(workers: int, syncs: int) -> None:
    started = await start(workers, spacing=0.01)  # 100 workers a second: 10 s and 50 s
    assert started.syncs == syncs
    assert 0 <= started.launcher_after_last_ready <= controller_of(World()).window(new_mpijob(workers=workers))
    assert started.status["replicaStatuses"]["Worker"] == {"active": workers}
    assert started.discover_hosts == every_worker(workers)


async def test_a_large_jobs_change_of_status_alone_waits_its_window_and_any_other_change_does_not() -> None:
    world = World()
    controller = controller_of(world)
    large, small = new_mpijob("large", workers=10_000), new_mpijob("small", workers=1000)
    for job in (large, small):
        world.cluster.given(MPIJOBS, job)
        written = {**job, "metadata": {**job["metadata"], "resourceVersion": "8"}, "status": {"startTime": EARLIER}}
        controller._on_mpijob(job, written)  # the status a sync wrote
    assert controller.queue.scheduled("default/large")
    assert 1.95 < scheduled_in(controller.queue, "default/large") <= 2.0
    assert not controller.queue.scheduled("default/small")
    assert await controller.queue.get() == "default/small", "up to 1,000 workers: synced at once, as before"
    suspended = {**large, "metadata": {**large["metadata"], "resourceVersion": "9"},
                 "spec": {**large["spec"], "runPolicy": {**large["spec"]["runPolicy"], "suspend": True}}}
    controller._on_mpijob(large, suspended)
    assert await controller.queue.get() == "default/large", "a new spec: synced at once"
    controller.queue.shutdown()
