"""Upstream's job counters, exactly, across one job's life on the fake cluster: each transition counted once,
also when a sync on a stale cache repeats it and its status write conflicts (a count follows a write)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from reconciler.runtime.api_resources import JOBS
from reconciler.runtime.client import ApiError
from tests.unit.reconciler.test_sync import World, new_mpijob

INFO = "job_info[('launcher', 'test-launcher'), ('namespace', 'default')]"


def counts(registry: CollectorRegistry) -> dict[str, float | None]:
    """The three job counters, and every ``mpi_operator_job_info`` series by its labels."""
    values: dict[str, float | None] = {name: registry.get_sample_value(f"mpi_operator_jobs_{name}_total")
                                       for name in ("created", "successful", "failed")}
    for metric in registry.collect():
        if metric.name == "mpi_operator_job_info":
            values.update({f"job_info{sorted(s.labels.items())}": s.value for s in metric.samples})
    return values


async def stale_sync_conflicts(world: World) -> None:
    """A sync on a cache that has not seen the last status write: that write is repeated, and conflicts."""
    with pytest.raises(ApiError) as raised:
        await world.sync()
    assert raised.value.conflict


@pytest.mark.parametrize(("outcome", "condition", "counter"), [
    pytest.param("succeed", "Complete", "successful", id="succeeded"),
    pytest.param("fail", "Failed", "failed", id="failed"),
])
async def test_each_transition_is_counted_once(outcome: str, condition: str, counter: str) -> None:
    world = World(new_mpijob(workers=1))
    registry = world.metrics.registry
    assert counts(registry) == {"created": 0.0, "successful": 0.0, "failed": 0.0}
    assert await world.sync() == "synced"
    created = {"created": 1.0, "successful": 0.0, "failed": 0.0, INFO: 1.0}  # the launcher is created at once
    assert counts(registry) == created
    await stale_sync_conflicts(world)
    world.cluster.catch_up()
    await world.sync()
    assert counts(registry) == created, "created once"

    world.cluster.catch_up()
    launcher = world.cluster.server[("jobs", "default", "test-launcher")]
    launcher["status"] = {"conditions": [{"type": condition, "status": "True", "reason": "BackoffLimitExceeded",
                                          "message": "Job has reached the specified backoff limit"}],
                          outcome.replace("succeed", "succeeded").replace("fail", "failed"): 1}
    world.cluster.given(JOBS, launcher)
    assert await world.sync() == "synced"
    finished = {**created, counter: 1.0}
    assert counts(registry) == finished
    await stale_sync_conflicts(world)
    for _ in range(2):
        world.cluster.catch_up()
        await world.sync()
    assert counts(registry) == finished, f"{counter} once"
