"""Progress-only writes (worker counts, Running workers in discover_hosts.sh) are spaced out per job;
condition changes are written at once."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from reconciler.mpijob.context import Shared
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.mpijob.metrics import OperatorMetrics
from reconciler.mpijob.sync import Reconciler
from reconciler.runtime.settle import SettleMemory, Settler
from reconciler.settings import Settings
from tests.unit.reconciler.test_sync import EARLIER, KEYS, NOW, World, created_condition, new_mpijob


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def settled_world(clock: Clock, requeued: list[tuple[str, float]], *, config_map: bool = True) -> World:
    job = new_mpijob(workers=4)
    job["status"] = {"conditions": [created_condition()], "startTime": EARLIER}
    world = World(job)
    settler = Settler(1.0, clock)
    settler.requeue = lambda key, delay: requeued.append((key, round(delay, 3)))
    world.reconciler = Reconciler(Shared(world.caches, world.cluster, Settings(), lambda: KEYS, settler=settler),
                                  OperatorMetrics(CollectorRegistry()), lambda: NOW)
    world.add_dependencies()
    if not config_map:
        del world.cluster.server[("configmaps", "default", "test-config")]
        world.cluster.catch_up()
    world.add_launcher(pods=[{"phase": "Running"}])
    return world


def restore_status(world: World) -> None:
    """The cache catches up with the status the fake server was sent."""
    assert world.job is not None
    world.job["status"] = world.cluster.status_written()
    world.cluster.given(MPIJOBS, world.job)


async def test_worker_counts_are_written_at_most_once_per_interval() -> None:
    clock, requeued = Clock(), list[tuple[str, float]]()
    world = settled_world(clock, requeued)
    world.add_workers(2, "Running")
    world.add_workers(2, "Pending", start=2)
    await world.sync()
    assert world.cluster.actions[-1] == ("update_status", "mpijobs", "test"), "the first progress write is free"
    assert requeued == [("default/test", 1.0)], "discover_hosts.sh waits for the Running workers to settle"
    restore_status(world)
    world.add_workers(3, "Running")
    clock.now += 0.25
    writes = len(world.cluster.actions)
    await world.sync()
    assert world.cluster.actions[writes:] == [], "a count-only change within the interval waits"
    assert requeued[1:] == [("default/test", 1.0), ("default/test", 0.75)], "discover_hosts.sh changed again"
    clock.now += 0.75
    await world.sync()
    assert world.cluster.actions[writes:] == [("update_status", "mpijobs", "test")]
    assert world.cluster.status_written()["replicaStatuses"]["Worker"] == {"active": 3}
    assert requeued[3:] == [("default/test", 0.25)], "three Running workers for an interval: settled at 1.25 s"
    clock.now += 0.25
    await world.sync()
    assert world.cluster.actions[writes + 1:] == [("patch", "configmaps", "test-config")]


async def test_a_condition_change_is_written_at_once() -> None:
    clock, requeued = Clock(), list[tuple[str, float]]()
    world = settled_world(clock, requeued)
    world.add_workers(3, "Running")
    world.add_workers(1, "Pending", start=3)
    await world.sync()
    restore_status(world)
    world.add_workers(4, "Running")  # every worker Running: the Running condition becomes True
    clock.now += 0.1
    await world.sync()
    status = world.cluster.status_written()
    assert status["conditions"][-1]["type"] == "Running"
    assert status["replicaStatuses"]["Worker"] == {"active": 4}



async def test_workers_starting_one_after_the_other_are_listed_in_one_patch_once_settled() -> None:
    """The ConfigMap is created before the workers run; they start running over 1.5 s (more than the
    interval): discover_hosts.sh is patched once, an interval after the last of them, with all four."""
    clock, requeued = Clock(), list[tuple[str, float]]()
    world = settled_world(clock, requeued, config_map=False)
    await world.sync()
    assert ("create", "configmaps", "test-config") in world.cluster.actions
    world.cluster.catch_up()
    writes = len(world.cluster.actions)
    for running in range(1, 5):
        world.add_workers(running, "Running")
        clock.now += 0.5
        await world.sync()
        world.cluster.catch_up()  # the status written (worker counts) is seen before the next sync
    assert ("patch", "configmaps", "test-config") not in world.cluster.actions[writes:]
    assert requeued[-1] == ("default/test", 1.0), "the last worker to run restarted the quiet period"
    clock.now += 1.0
    await world.sync()
    patches = [a for a in world.cluster.actions[writes:] if a[:2] == ("patch", "configmaps")]
    assert patches == [("patch", "configmaps", "test-config")], "one patch, with all four workers"
    hosts = world.cluster.server[("configmaps", "default", "test-config")]["data"]["discover_hosts.sh"]
    assert hosts == "#!/bin/sh\n" + "".join(f"echo test-worker-{i}.test.default.svc\n" for i in range(4))


def test_a_settling_write_waits_for_quiet_but_no_longer_than_its_limit() -> None:
    clock, requeued = Clock(), list[tuple[str, float]]()
    settler = Settler(1.0, clock)
    settler.requeue = lambda key, delay: requeued.append((key, round(delay, 3)))
    memory = SettleMemory()
    for step in range(5):  # a new list every 0.5 s, from 100.0 to 102.0
        assert settler.settle("ns/job", memory, "config", f"list {step}") is True
        clock.now += 0.5
    assert requeued == [("ns/job", 1.0), ("ns/job", 1.0), ("ns/job", 1.0), ("ns/job", 1.0), ("ns/job", 1.0)]
    assert settler.settle("ns/job", memory, "config", "list 5") is True, "102.5: the limit is 103.0"
    assert requeued[-1] == ("ns/job", 0.5)
    clock.now += 0.5
    assert settler.settle("ns/job", memory, "config", "list 6") is False, "3 intervals after the first change"
    settler.wrote(memory, "config")
    clock.now += 0.5
    assert settler.settle("ns/job", memory, "config", "list 7") is True
    assert requeued[-1] == ("ns/job", 1.0), "spaced an interval after the write, and quiet for one"
    settler.up_to_date(memory, "config")
    clock.now += 2.0
    assert settler.settle("ns/job", memory, "config", "list 8") is True, "a change after an undone one starts afresh"
    assert requeued[-1] == ("ns/job", 1.0)
    assert Settler(0.0, clock).settle("ns/job", memory, "config", "list 9") is False, "interval 0: at once"
