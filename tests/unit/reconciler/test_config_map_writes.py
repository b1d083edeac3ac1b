"""The bytes of ``discover_hosts.sh`` writes while a job's workers start one after the other.

A simulated start: W workers become Running one by one, ``SPACING`` seconds apart; every pod event syncs the
job, and so does the requeue the settler asks for, at its time (one pending per job, as the work queue keeps
it). Counted: the ConfigMap patches sent and their bytes (the JSON merge patch body, which carries
``discover_hosts.sh`` alone: the hostfile does not change). Without spacing (``--progress-write-interval=0``,
what upstream does) every start rewrites the whole list: O(W^2) bytes. With the default interval of 1 s the
list is written about once per interval (at most every 3 intervals while workers keep starting), and the last
write holds every Running worker (docs/reconciler.md, "ConfigMap writes").
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from prometheus_client import CollectorRegistry

from reconciler.mpijob.context import Shared
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.mpijob.metrics import OperatorMetrics
from reconciler.mpijob.sync import Reconciler
from reconciler.runtime.api_resources import CONFIG_MAPS
from reconciler.runtime.settle import Settler
from reconciler.settings import Settings
from tests.unit.reconciler.test_sync import EARLIER, KEYS, NOW, World, created_condition, new_mpijob

SPACING = 0.01  # 100 workers a second: 1,000 workers Running within 10 s


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Due:
    """The work queue's delayed add of the one key: an earlier pending add stands (workqueue.add_after)."""

    def __init__(self) -> None:
        self.at: float | None = None

    def add(self, at: float) -> None:
        self.at = at if self.at is None else min(self.at, at)

    def take(self) -> float:
        assert self.at is not None
        at, self.at = self.at, None
        return at


@dataclass
class Written:
    patches: int
    bytes: int
    last: str


async def start(workers: int, interval: float, spacing: float = SPACING) -> Written:
    """Sync a job while its workers become Running one by one; what was patched into its ConfigMap."""
    clock, due = Clock(), Due()
    job = new_mpijob(workers=workers)
    job["status"] = {"conditions": [created_condition()], "startTime": EARLIER}
    world = World(job)
    settler = Settler(interval, clock)
    settler.requeue = lambda key, delay: due.add(clock.now + delay)
    world.reconciler = Reconciler(Shared(world.caches, world.cluster, Settings(), lambda: KEYS, settler=settler),
                                  OperatorMetrics(CollectorRegistry()), lambda: NOW)
    world.add_dependencies()  # the ConfigMap exists, no worker Running yet
    world.add_launcher(pods=[{"phase": "Running"}])
    world.add_workers(workers, "Pending")

    async def sync() -> None:
        await world.sync()
        for resource, name in ((CONFIG_MAPS, "test-config"), (MPIJOBS, "test")):  # the informers catch up
            world.cluster.given(resource, world.cluster.server[(resource.plural, "default", name)])

    started = clock.now
    for index in range(workers):
        at = started + index * spacing
        while due.at is not None and due.at <= at:  # a requeue that falls before this start
            clock.now = max(clock.now, due.take())
            await sync()
        clock.now = at
        world.add_workers(1, "Running", start=index)
        await sync()
    while due.at is not None:
        clock.now = max(clock.now, due.take())
        await sync()
    sent = [body["patch"] for verb, plural, _, body in world.cluster.writes
            if (verb, plural) == ("patch", "configmaps")]
    last = world.cluster.server[("configmaps", "default", "test-config")]["data"]["discover_hosts.sh"]
    return Written(len(sent), sum(len(orjson.dumps(patch)) for patch in sent), last)


def every_worker(workers: int) -> str:
    """discover_hosts.sh with every worker Running, in index order."""
    return "#!/bin/sh\n" + "".join(f"echo test-worker-{i}.test.default.svc\n" for i in range(workers))


async def test_without_spacing_every_start_rewrites_the_whole_list() -> None:
    written = await start(1000, 0.0)
    assert written.last == every_worker(1000)
    assert (written.patches, written.bytes) == (1000, 19_496_492)  # 19.5 MB: the sum of every list length


async def test_a_thousand_workers_starting_are_written_a_few_times_with_every_one_at_the_end() -> None:
    written = await start(1000, 1.0)
    assert written.last == every_worker(1000)
    assert (written.patches, written.bytes) == (4, 109_085)  # 109 KB: about twice the final list


async def test_a_burst_of_starts_within_an_interval_is_one_write() -> None:
    written = await start(50, 1.0)  # 0.5 s of starts
    assert written.last == every_worker(50)
    assert written.patches == 1


async def test_a_patch_carries_only_the_keys_that_change() -> None:
    """A new list of Running workers sends discover_hosts.sh alone; a drifted ConfigMap gets its changed hostfile
    and its extra key removed, and its unchanged discover_hosts.sh is left out."""
    job = new_mpijob(workers=2)
    job["status"] = {"conditions": [created_condition()], "startTime": EARLIER}
    world = World(job)
    world.add_dependencies()
    world.add_launcher(pods=[{"phase": "Running"}])
    world.add_workers(2, "Running")
    await world.sync()
    [body] = [body for verb, plural, _, body in world.cluster.writes if (verb, plural) == ("patch", "configmaps")]
    assert body["patch"] == {"data": {"discover_hosts.sh": every_worker(2)}, "metadata": {"resourceVersion": "1"}}
    world.cluster.catch_up()
    config = world.cluster.server[("configmaps", "default", "test-config")]
    hostfile = config["data"]["hostfile"]
    world.cluster.given(CONFIG_MAPS, {**config, "data": {**config["data"], "hostfile": "drifted\n", "extra": "x"}})
    await world.sync()
    last = [body for verb, plural, _, body in world.cluster.writes if (verb, plural) == ("patch", "configmaps")][-1]
    assert last["patch"]["data"] == {"extra": None, "hostfile": hostfile}


async def test_a_slow_start_writes_bytes_linear_in_the_workers() -> None:
    """1,000 workers starting over 90 s (the pace of a 10,000-worker job on 2 cores, issue 36). Rewritten at most 3
    intervals apart, the list was written 30 times, 615,065 bytes (15.8 times the final list); written only once
    it grew by half (or was quiet for an interval, or complete), 9 times, 125,696 bytes: the lists written grow
    geometrically, so their bytes stay within a few times the final list, O(W), and the last write holds every
    Running worker."""
    written = await start(1000, 1.0, spacing=0.09)
    final = len(orjson.dumps({"discover_hosts.sh": every_worker(1000)}))
    assert written.last == every_worker(1000)
    assert (written.patches, written.bytes) == (9, 125_696)
    assert written.bytes < 4 * final


async def test_a_worker_leaving_is_written_within_the_settle_limit() -> None:
    """A host that leaves discover_hosts.sh is never held back by the growth rule: 100 Running workers, one of
    them stops Running; the list without it is written once it settles."""
    clock, due = Clock(), Due()
    job = new_mpijob(workers=100)
    job["status"] = {"conditions": [created_condition()], "startTime": EARLIER}
    world = World(job)
    settler = Settler(1.0, clock)
    settler.requeue = lambda key, delay: due.add(clock.now + delay)
    world.reconciler = Reconciler(Shared(world.caches, world.cluster, Settings(), lambda: KEYS, settler=settler),
                                  OperatorMetrics(CollectorRegistry()), lambda: NOW)
    world.add_dependencies(running_workers=[f"test-worker-{i}" for i in range(100)])
    world.add_launcher(pods=[{"phase": "Running"}])
    world.add_workers(100, "Running")
    world.add_workers(1, "Failed", start=7)
    await world.sync()
    while due.at is not None:
        clock.now = max(clock.now, due.take())
        for resource, name in ((CONFIG_MAPS, "test-config"), (MPIJOBS, "test")):  # the informers catch up
            world.cluster.given(resource, world.cluster.server[(resource.plural, "default", name)])
        await world.sync()
    script = world.cluster.server[("configmaps", "default", "test-config")]["data"]["discover_hosts.sh"]
    assert script == every_worker(100).replace("echo test-worker-7.test.default.svc\n", "")
    assert clock.now <= 100.0 + 3 * 1.0
