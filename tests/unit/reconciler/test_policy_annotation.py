"""The reconciler reads a policy annotation that is valid but not canonical (a v2beta1 client wrote it where the
mutating webhook did not run): the job runs with the policy its user wrote."""

from __future__ import annotations

import json

from reconciler.mpijob.policy_decisions import failure_policy_of
from shared.api.v2types import FailurePolicy
from tests.unit.reconciler.test_sync import World
from tests.unit.reconciler.test_sync_failure_policy import (
    ANNOTATION,
    RULES,
    add_attempt,
    evicted,
    policy_job,
    running_status,
)

# the same policy as policy_job's, with spaces and its keys in the order a person writes them
SPACED = json.dumps({"spec": {"runPolicy": {"failurePolicy": {"rules": RULES, "maxRestarts": 2}}}}, indent=1)


def test_a_policy_annotation_that_is_not_canonical_is_read() -> None:
    job = policy_job(2)
    job["metadata"]["annotations"] = {ANNOTATION: SPACED}
    assert failure_policy_of(job) == FailurePolicy.model_validate({"maxRestarts": 2, "rules": RULES})
    assert failure_policy_of(job) == failure_policy_of(policy_job(2))


def test_an_annotation_that_is_no_policy_is_none() -> None:
    job = policy_job(2)
    for value in ('{"spec":{"runPolicy":{"failurePolicy":{"rules":[]},"x":1}}}', "[]", "{"):
        job["metadata"]["annotations"] = {ANNOTATION: value}
        assert failure_policy_of(job) is None, value
    job["metadata"]["annotations"] = {ANNOTATION: SPACED}
    job["spec"]["runPolicy"] = None  # what annotation_errors refuses is never run with
    assert failure_policy_of(job) is None


async def test_a_disrupted_worker_restarts_a_job_whose_policy_is_not_canonical() -> None:
    job = policy_job(2, running_status())
    job["metadata"]["annotations"] = {ANNOTATION: SPACED}
    world = World(job)
    world.add_dependencies()
    add_attempt(world, 0, {1: evicted()})
    assert await world.sync() == "restarted"
    assert world.cluster.status_written()["restartCount"] == 1
