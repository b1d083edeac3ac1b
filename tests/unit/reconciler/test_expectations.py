"""Deletion expectations are of one object (UID), not of a name: a worker deleted and created again under
the same name before the cache showed it terminating is still deleted when it must be."""

from __future__ import annotations

from reconciler.mpijob import builders
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.runtime.api_resources import PODS
from reconciler.runtime.expectations import Expectations
from tests.unit.reconciler.test_sync import EARLIER, World, created_condition, defaulted, new_mpijob


def test_a_deletion_is_of_the_object_deleted() -> None:
    deletions = Expectations().deletions
    deletions.add("ns", "pod", "uid-1")
    assert deletions.holds("ns", "pod", "uid-1")
    assert ("ns", "pod") in deletions
    assert not deletions.holds("ns", "pod", "uid-2"), "another object of that name"
    assert not deletions.holds("ns", "pod", "uid-1"), "the entry of the old object is gone"


def test_deletions_expire() -> None:
    deletions = Expectations(ttl=-1).deletions
    deletions.add("ns", "pod", "uid-1")
    assert not deletions.holds("ns", "pod", "uid-1")


async def test_a_worker_recreated_under_a_deleted_name_is_deleted_again() -> None:
    job = new_mpijob(workers=1)
    job["status"] = {"conditions": [created_condition()], "startTime": EARLIER}
    world = World(new_mpijob(workers=2))
    world.add_dependencies(["test-worker-0", "test-worker-1"])
    world.add_workers(2, "Running")
    world.job = job
    world.cluster.given(MPIJOBS, job)
    await world.sync()
    assert ("delete", "pods", "test-worker-1") in world.cluster.actions
    world.cluster.catch_up()  # the status written and the deletion are seen
    # gone at once (never seen terminating), then created again under its name (scaled up and down again)
    again = builders.build_worker(defaulted(new_mpijob(workers=2)), 1)
    again["metadata"]["uid"] = "worker-1-again"
    again["status"] = {"phase": "Running"}
    world.cluster.given(PODS, again)
    writes = len(world.cluster.actions)
    await world.sync()
    assert ("delete", "pods", "test-worker-1") in world.cluster.actions[writes:]
