"""Worker creation: ownership of every existing pod checked first, the first failure cancels the creates in
flight, and one Warning event per sync however many workers failed (issue 7)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from reconciler.mpijob import builders
from reconciler.mpijob.caches import Caches
from reconciler.mpijob.context import Shared
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.mpijob.errors import ResourceExistsError
from reconciler.mpijob.metrics import OperatorMetrics
from reconciler.mpijob.status import Event
from reconciler.mpijob.sync import Reconciler
from reconciler.runtime.api_resources import CONFIG_MAPS, PODS, SECRETS, SERVICES, Resource
from reconciler.runtime.client import ApiError
from reconciler.settings import Settings
from shared.jsondict import JSONDict
from tests.unit.reconciler.fake_cluster import FakeCluster
from tests.unit.reconciler.test_sync import KEYS, NOW, World, defaulted, new_mpijob

QUOTA = ApiError(403, "Forbidden", 'pods "test-worker-0" is forbidden: exceeded quota: pods, requested: pods=1')


def world_with_dependencies(workers: int) -> World:
    world = World(new_mpijob(workers=workers))
    world.add_dependencies()
    return world


async def test_a_foreign_worker_stops_the_sync_before_any_create() -> None:
    world = world_with_dependencies(4)
    foreign = builders.build_worker(defaulted(new_mpijob(workers=4)), 2)
    foreign["metadata"]["ownerReferences"][0]["uid"] = "another-mpijob"
    world.cluster.given(PODS, foreign)
    with pytest.raises(ResourceExistsError, match='Resource "test-worker-2" of Kind "Pod" already exists'):
        await world.sync()
    assert [a for a in world.cluster.actions if a[1] == "pods"] == [], "no worker created next to a foreign one"
    assert world.cluster.events == [Event("Warning", "ErrResourceExists",
                                          'Resource "test-worker-2" of Kind "Pod" already exists and is not '
                                          "managed by MPIJob")]


async def test_a_quota_failure_is_one_event_per_sync() -> None:
    world = world_with_dependencies(8)
    world.cluster.failures[("create", "pods")] = QUOTA
    with pytest.raises(ApiError) as raised:
        await world.sync()
    assert raised.value is QUOTA, "the API error itself is raised, not an ExceptionGroup"
    failures = [e for e in world.cluster.events if e.reason == "MPIJobFailed"]
    assert failures == [Event("Warning", "MPIJobFailed", f"worker pod created failed: {QUOTA}")]


async def test_the_first_failure_cancels_the_creates_in_flight() -> None:
    world = world_with_dependencies(4)
    world.cluster.stalled = {"test-worker-0", "test-worker-2", "test-worker-3"}
    world.cluster.failures[("create", "pods", "test-worker-1")] = ApiError(422, "Invalid", "denied by a webhook")
    with pytest.raises(ApiError, match="denied by a webhook"):
        await asyncio.wait_for(world.sync(), timeout=10)
    assert sorted(world.cluster.cancelled) == ["test-worker-0", "test-worker-2", "test-worker-3"]
    assert [e.reason for e in world.cluster.events] == ["MPIJobFailed", "MPIJobCreated", "CreateFailed"], (
        "one MPIJobFailed event; the status written says why (WorkersReady=False/CreateFailed)")


async def test_a_foreign_worker_found_by_create_cancels_the_others() -> None:
    world = world_with_dependencies(3)
    foreign = copy.deepcopy(builders.build_worker(defaulted(new_mpijob(workers=3)), 0))
    del foreign["metadata"]["ownerReferences"]
    world.cluster.given(PODS, foreign, cached=False)  # no owner: the informer never shows it
    world.cluster.stalled = {"test-worker-1", "test-worker-2"}
    with pytest.raises(ResourceExistsError):
        await asyncio.wait_for(world.sync(), timeout=10)
    assert sorted(world.cluster.cancelled) == ["test-worker-1", "test-worker-2"]
    assert [e.reason for e in world.cluster.events] == ["ErrResourceExists"]


class TimingOutOnce(FakeCluster):
    """The create of one worker times out on the client the first time it is sent (nothing created)."""

    def __init__(self, caches: Caches, name: str) -> None:
        super().__init__(caches)
        self.name, self.timed_out = name, False

    async def create(self, resource: Resource, obj: JSONDict) -> JSONDict:
        if obj["metadata"]["name"] == self.name and not self.timed_out:
            self.timed_out = True
            raise TimeoutError
        return await super().create(resource, obj)


async def test_a_retry_after_a_timeout_mid_creation_creates_only_the_missing_workers() -> None:
    """A 1,000-worker sync fails at its 600th create; the retry runs before the informer showed any pod it made (a
    cache lagging behind a large creation): the expectations of the first sync stand for them, so every worker is
    created exactly once, with no create answered AlreadyExists and no GET (issue 36: 6,479 of each at W=10,000)."""
    workers = 1000
    world = World(new_mpijob(workers=workers))
    world.cluster = TimingOutOnce(world.caches, "test-worker-600")
    world.reconciler.shared.cluster = world.cluster
    world.add_dependencies()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(world.sync(), timeout=20)
    first = [name for verb, plural, name in world.cluster.actions if (verb, plural) == ("create", "pods")]
    assert 0 < len(first) < workers
    await asyncio.wait_for(world.sync(), timeout=20)
    created = [name for verb, plural, name in world.cluster.actions if (verb, plural) == ("create", "pods")]
    assert sorted(created) == sorted(f"test-worker-{i}" for i in range(workers)), "each worker created once"
    assert [read for read in world.cluster.reads if read[0] == "pods"] == [], "no create answered AlreadyExists"


class CountingCluster(FakeCluster):
    """Counts the worker pods built and not yet answered, and the creates in flight, at their peak."""

    def __init__(self, caches: Caches) -> None:
        super().__init__(caches)
        self.outstanding = self.in_flight = self.peak_outstanding = self.peak_in_flight = 0

    def built(self) -> None:
        self.outstanding += 1
        self.peak_outstanding = max(self.peak_outstanding, self.outstanding)

    async def create(self, resource: Resource, obj: JSONDict) -> JSONDict:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        for _ in range(3):  # the answer takes a few turns of the event loop, as a real one does
            await asyncio.sleep(0)
        try:
            return await super().create(resource, obj)
        finally:
            self.in_flight -= 1
            if resource.plural == "pods":
                self.outstanding -= 1


async def test_the_write_limit_holds_for_all_the_jobs_synced_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    caches = Caches()
    cluster = CountingCluster(caches)
    reconciler = Reconciler(Shared(caches, cluster, Settings(max_concurrent_writes=3), lambda: KEYS),
                            OperatorMetrics(CollectorRegistry()), lambda: NOW)
    for name in ("one", "two"):
        job = new_mpijob(name, workers=8)
        cluster.given(MPIJOBS, job)
        defaults = defaulted(job)
        cluster.given(SERVICES, builders.build_service(defaults))
        cluster.given(CONFIG_MAPS, builders.build_config_map(defaults, "", []))
        cluster.given(SECRETS, builders.build_ssh_secret(defaults, KEYS))
    build_worker = builders.build_worker

    def counted(*args: Any, **kwargs: Any) -> JSONDict:
        cluster.built()
        return build_worker(*args, **kwargs)

    monkeypatch.setattr(builders, "build_worker", counted)
    await asyncio.wait_for(asyncio.gather(reconciler.sync("default/one"), reconciler.sync("default/two")), 10)
    created = sorted(name for verb, plural, name in cluster.actions if (verb, plural) == ("create", "pods"))
    assert created == sorted(f"{job}-worker-{i}" for job in ("one", "two") for i in range(8))
    assert (cluster.peak_in_flight, cluster.peak_outstanding) == (3, 3), (
        "3 writes in flight for both jobs together, and a pod is built only when its write can start")


class Milestone(CountingCluster):
    """Sets ``reached`` once ``count`` pods were created."""

    def __init__(self, caches: Caches, count: int) -> None:
        super().__init__(caches)
        self.count, self.reached = count, asyncio.Event()

    async def create(self, resource: Resource, obj: JSONDict) -> JSONDict:
        created = await super().create(resource, obj)
        if sum(1 for verb, plural, _ in self.actions if (verb, plural) == ("create", "pods")) >= self.count:
            self.reached.set()
        return created


async def test_a_small_job_is_not_queued_behind_a_large_creation() -> None:
    """A 4-worker job synced while a 2,000-worker job's creation runs gets its workers within a few rounds of the
    64 writes in flight (the write slots are served in turn), not after the large job's 1,800 creates left."""
    caches = Caches()
    cluster = Milestone(caches, 200)
    reconciler = Reconciler(Shared(caches, cluster, Settings(), lambda: KEYS), OperatorMetrics(CollectorRegistry()),
                            lambda: NOW)
    for name, workers in (("large", 2000), ("small", 4)):
        job = new_mpijob(name, workers=workers)
        cluster.given(MPIJOBS, job)
        defaults = defaulted(job)
        cluster.given(SERVICES, builders.build_service(defaults))
        cluster.given(CONFIG_MAPS, builders.build_config_map(defaults, "", []))
        cluster.given(SECRETS, builders.build_ssh_secret(defaults, KEYS))
    large = asyncio.create_task(reconciler.sync("default/large"))
    await asyncio.wait_for(cluster.reached.wait(), 10)
    await asyncio.wait_for(reconciler.sync("default/small"), 10)
    created = [name for verb, plural, name in cluster.actions if (verb, plural) == ("create", "pods")]
    assert not large.done()
    small = [position for position, name in enumerate(created) if name.startswith("small-")]
    assert sorted(created[p] for p in small) == [f"small-worker-{i}" for i in range(4)]
    assert max(small) < 200 + 3 * 64, "the small job waited a few rounds of the 64 write slots at most"
    await asyncio.wait_for(large, 30)


async def test_the_cluster_domain_reaches_the_workers_search_path_and_the_hostfile() -> None:
    """--cluster-domain=kube.local: the sync creates workers whose search path is ``<job>.<ns>.svc.kube.local``
    (upstream's fix after v0.8.2) beside a hostfile of ``...svc.kube.local`` names; the launcher gets no search
    path. Objects compared whole with the builders given the same domain."""
    world = World(new_mpijob(workers=2, implementation="Intel"))
    world.reconciler = Reconciler(Shared(world.caches, world.cluster, Settings(cluster_domain="kube.local"),
                                         lambda: KEYS), OperatorMetrics(CollectorRegistry()), lambda: NOW)
    await world.sync()
    assert world.job is not None
    model = defaulted(world.job)
    for index in range(2):
        worker = world.cluster.created("pods", f"test-worker-{index}")
        assert worker == builders.build_worker(model, index, cluster_domain="kube.local")
        assert worker["spec"]["dnsConfig"] == {"searches": ["test.default.svc.kube.local"]}
    config = world.cluster.created("configmaps", "test-config")
    assert config["data"]["hostfile"] == ("test-worker-0.test.default.svc.kube.local:1\n"
                                          "test-worker-1.test.default.svc.kube.local:1\n")
    launcher = world.cluster.created("jobs", "test-launcher")
    assert launcher == builders.build_launcher_job(model)
    assert "dnsConfig" not in launcher["spec"]["template"]["spec"]
