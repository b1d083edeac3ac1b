"""A job ended by this reconciler before its launcher finished (an eviction, a FailJob rule, ReachedMaxRestarts)
keeps a suspended launcher Job, which never finishes: ``ttlSecondsAfterFinished`` is counted from the job's
completionTime instead, and the launcher Job is deleted when it has passed, as upstream's finished launcher is
by the TTL controller (spec/controller.md 3.7)."""

from __future__ import annotations

import pytest

from tests.unit.reconciler.test_sync import EARLIER, World, condition, created_condition, new_mpijob

EVICTED = condition("Failed", "True", "MPIJobEvicted", "1/1 workers are evicted")


def stopped(ttl: int | None, completion_time: str, *, suspended: bool = True,
            launcher_conditions: list[dict[str, str]] | None = None) -> tuple[World, list[tuple[str, float]]]:
    """A job evicted at ``completion_time`` whose launcher Job this reconciler suspended; what it requeued."""
    job = new_mpijob(workers=1)
    if ttl is not None:
        job["spec"]["runPolicy"]["ttlSecondsAfterFinished"] = ttl
    job["status"] = {"conditions": [created_condition(), EVICTED], "startTime": EARLIER,
                     "completionTime": completion_time, "replicaStatuses": {"Launcher": {}, "Worker": {}}}
    world = World(job)
    world.add_dependencies()
    world.add_launcher(suspend=suspended, conditions=launcher_conditions)
    requeued: list[tuple[str, float]] = []
    world.reconciler.shared.requeue = lambda key, delay: requeued.append((key, delay))
    return world, requeued


async def test_a_stopped_launcher_is_kept_until_its_ttl_then_deleted() -> None:
    world, requeued = stopped(5, "2026-11-29T11:59:58Z")  # the sync runs at 12:00:00 (T): 3 s left
    assert await world.sync() == "finished"
    assert (world.cluster.actions, requeued) == ([], [("default/test", 3.0)])
    world, requeued = stopped(5, "2026-11-29T11:59:55Z")  # 5 s passed
    assert await world.sync() == "finished"
    assert (world.cluster.actions, requeued) == ([("delete", "jobs", "test-launcher")], [])
    assert world.cluster.writes[0][3]["propagationPolicy"] == "Foreground"
    world.cluster.catch_up()
    assert await world.sync() == "finished"
    assert world.cluster.actions == [("delete", "jobs", "test-launcher")], "deleted once, nothing created again"


@pytest.mark.parametrize(("ttl", "suspended", "launcher_conditions"), [
    (None, True, None),
    (5, False, [{"type": "Failed", "status": "True"}]),
    (5, False, [{"type": "Complete", "status": "True"}]),
], ids=["no-ttl", "launcher-failed", "launcher-complete"])
async def test_only_a_launcher_this_reconciler_stopped_is_expired_by_it(
        ttl: int | None, suspended: bool, launcher_conditions: list[dict[str, str]] | None) -> None:
    """Without a TTL it stays; a launcher that finished is the TTL controller's (its own TTL)."""
    world, requeued = stopped(ttl, "2026-11-29T11:00:00Z", suspended=suspended,
                              launcher_conditions=launcher_conditions)
    assert await world.sync() == "finished"
    assert (world.cluster.actions, requeued) == ([], [])

