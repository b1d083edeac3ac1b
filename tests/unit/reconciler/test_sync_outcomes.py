"""What a sync did (``SyncOutcome``): the values the sync log line has always shown, shown byte for byte by both
log formats; and the failurePolicy step's effect, returned, not written (``restarts.run_failure_policy``)."""

from __future__ import annotations

import copy
import logging
import re
from typing import cast

import pytest

from reconciler.mpijob.context import job_context
from reconciler.mpijob.controller import Controller
from reconciler.mpijob.outcomes import SyncOutcome
from reconciler.mpijob.restarts import PolicyEffect, run_failure_policy
from reconciler.mpijob.status import Event
from reconciler.mpijob.sync import rfc3339
from reconciler.runtime.client import KubeClient
from reconciler.runtime.workqueue import WorkQueue
from shared.logs import JSONFormatter, LogfmtFormatter
from tests.unit.reconciler.test_sync import NOW, World, created_condition, defaulted, new_mpijob
from tests.unit.reconciler.test_sync_failure_policy import (
    RESTART_MESSAGE,
    RESTARTING,
    WORKERS_RESTARTING,
    restarted_world,
    running_status,
)


def test_the_outcomes_keep_the_strings_the_sync_log_has_always_shown() -> None:
    assert [outcome.value for outcome in SyncOutcome] == [
        "invalid key", "not found", "deleting", "invalid", "finished", "refused", "restarting", "restarted", "failed",
        "synced", "deleted"]


def world_of(case: str) -> World:
    if case == "managed":
        return World(new_mpijob(workers=1, runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"}))
    return World(new_mpijob(workers=1)) if case == "job" else World()


@pytest.mark.parametrize(("case", "key", "logfmt", "json"), [
    ("job", "default/test", "outcome=synced", '"outcome":"synced"'),
    ("none", "default/test", 'outcome="not found"', '"outcome":"not found"'),
    ("none", "no-slash", 'outcome="invalid key"', '"outcome":"invalid key"'),
    ("managed", "default/test", 'outcome="managed by kueue.x-k8s.io/multikueue"',
     '"outcome":"managed by kueue.x-k8s.io/multikueue"'),
], ids=["synced", "not-found", "invalid-key", "managed-by"])
async def test_the_sync_log_line_shows_the_outcome_as_a_plain_string(
        caplog: pytest.LogCaptureFixture, case: str, key: str, logfmt: str, json: str) -> None:
    world = world_of(case)
    controller = Controller(cast(KubeClient, None), world.reconciler, WorkQueue())
    caplog.set_level(logging.INFO, logger="reconciler")
    await controller.process(key)
    [record] = [r for r in caplog.records if r.getMessage() == "sync"]
    line = re.sub(r"duration_ms=\S+", "duration_ms=D", LogfmtFormatter().format(record))
    assert line.split(" ", 1)[1] == f"level=info logger=reconciler msg=sync key={key} {logfmt} duration_ms=D"
    assert json in JSONFormatter().format(record)


async def test_the_failure_policy_step_returns_its_effect_and_leaves_the_status_and_the_cluster_alone() -> None:
    world = restarted_world()
    assert world.job is not None
    ctx = job_context(defaulted(world.job), world.job, rfc3339(NOW), world.reconciler.shared)
    status = copy.deepcopy(running_status())
    before = copy.deepcopy(status)
    effect = await run_failure_policy(ctx, status)
    assert status == before, "the sync's status is not changed"
    assert world.cluster.actions == [], "nothing written, nothing deleted: the sync writes, then follows up"
    assert effect == PolicyEffect(
        {"conditions": [WORKERS_RESTARTING, created_condition(), RESTARTING], "readyWorkers": "0/2", "restartCount": 1,
         "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 2}}},
        SyncOutcome.RESTARTED, (Event("Warning", "RestartJobFailurePolicyAction", RESTART_MESSAGE),))
    assert effect.restart_count == 1


async def test_without_a_decision_the_effect_only_carries_the_restart_count() -> None:
    world = restarted_world()
    assert world.job is not None
    world.job["spec"]["runPolicy"]["suspend"] = True  # pods deleted by a suspension are no failures
    ctx = job_context(defaulted(world.job), world.job, rfc3339(NOW), world.reconciler.shared)
    status = running_status()
    del status["restartCount"]  # a job that never had one
    effect = await run_failure_policy(ctx, status)
    assert effect == PolicyEffect({**running_status(), "restartCount": 0})
    assert "restartCount" not in status
    assert world.cluster.actions == []
