"""Bookkeeping and error outcomes (issue 7): a deleted job's expectations and settler entries are forgotten,
MPIJobs are cached without managedFields, a 404 on the status write means done, a conflict backs off, an
object the strict model cannot parse is a ValidationError event, and a hostfile too large for a ConfigMap
refuses the job before anything is created."""

from __future__ import annotations

import copy
from typing import cast

import pytest

from reconciler.mpijob.caches import slim_mpijob
from reconciler.mpijob.controller import Controller
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.mpijob.status import Event
from reconciler.runtime.client import ApiError, KubeClient
from reconciler.runtime.workqueue import WorkQueue
from shared.jsondict import JSONDict
from tests.unit.reconciler.test_sync import T, World, condition, created_condition, new_mpijob

NOT_FOUND = ApiError(404, "NotFound", 'mpijobs.kubeflow.org "test" not found')
CONFLICT = ApiError(409, "Conflict", "the object has been modified; please apply your changes to the latest version")


def with_controller(job: JSONDict) -> tuple[World, Controller]:
    """A world whose caches are the stores of a controller's informers (never started)."""
    world = World()
    controller = Controller(cast(KubeClient, None), world.reconciler, WorkQueue())
    world.job = job
    world.cluster.given(MPIJOBS, job)
    return world, controller


async def test_a_job_deleted_and_created_again_gets_its_workers_at_once() -> None:
    world, controller = with_controller(new_mpijob(workers=2))
    await world.sync()
    assert [a for a in world.cluster.actions if a[1] == "pods"] == [
        ("create", "pods", "test-worker-0"), ("create", "pods", "test-worker-1")]
    old = world.caches.mpijobs.delete("default", "test")
    controller._on_mpijob(old, None)  # the informer's delete event; GC then removes the children
    world.cluster.server.clear()
    world.cluster.writes.clear()
    again = new_mpijob(workers=2)
    again["metadata"]["uid"] = "second-uid"
    world.cluster.given(MPIJOBS, again)
    await world.sync()
    assert [a for a in world.cluster.actions if a[1] == "pods"] == [
        ("create", "pods", "test-worker-0"), ("create", "pods", "test-worker-1")], \
        "the first job's pending creations must not hold back the second job's workers"


def test_mpijobs_are_cached_without_managed_fields() -> None:
    job = new_mpijob(workers=1)
    job["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]
    before = copy.deepcopy(job)
    slim = slim_mpijob(job)
    assert slim is not None
    assert "managedFields" not in slim["metadata"]
    assert slim == {**before, "metadata": {k: v for k, v in before["metadata"].items() if k != "managedFields"}}
    assert job == before, "the watched object is not changed"


async def test_a_status_write_answering_not_found_is_done() -> None:
    world = World(new_mpijob(workers=1))
    world.cluster.failures[("update_status", "mpijobs")] = NOT_FOUND
    assert await world.sync() == "deleted"
    assert world.cluster.events == [], "no events about a job that is gone"


async def test_a_conflict_is_retried_with_a_growing_backoff() -> None:
    world, controller = with_controller(new_mpijob(workers=1))
    world.cluster.failures[("update_status", "mpijobs")] = CONFLICT
    for _ in range(3):
        await controller.process("default/test")
    assert controller.queue.retries("default/test") == 3
    controller.queue.shutdown()


@pytest.mark.parametrize(("spec_change", "message"), [
    pytest.param({"slotsPerWorker": "two"},
                 'spec.slotsPerWorker: Invalid value: "two": must be of type integer', id="string for an integer"),
    pytest.param({"runPolicy": "All"}, 'spec.runPolicy: Invalid value: "All": must be of type object',
                 id="string for an object"),
    pytest.param({"runPolicy": {"managedBy": 5}}, "spec.runPolicy.managedBy: Invalid value: 5: must be of type string",
                 id="number for managedBy"),
])
async def test_an_object_the_model_cannot_parse_is_a_validation_event(spec_change: dict[str, str],
                                                                      message: str) -> None:
    job = new_mpijob(workers=1)
    job["spec"].update(spec_change)
    world = World(job)
    assert await world.sync() == "invalid"
    assert world.cluster.actions == []
    assert world.cluster.events == [Event("Warning", "ValidationError", f"Found validation errors: {message}")]


def huge_job(workers: int) -> JSONDict:
    job = new_mpijob(workers=workers)
    job["status"] = {}
    return job


async def test_a_hostfile_too_large_for_a_config_map_refuses_the_job_before_anything_is_created() -> None:
    world = World(huge_job(30_000))
    assert await world.sync() == "refused"
    message = ('Found validation errors: spec.mpiReplicaSpecs[Worker].replicas: Invalid value: 30000: the hostfile '
               'and discover_hosts.sh of ConfigMap "test-config" would need 2467815 bytes, more than the 1048576 '
               "bytes a ConfigMap can hold; at most 12900 workers fit with these names")
    assert world.cluster.actions == [("update_status", "mpijobs", "test")]
    assert world.cluster.status_written() == {
        "conditions": [condition("WorkersReady", "False", "MPIJobFinished", "MPIJob finished: workers are released"),
                       created_condition(), condition("Failed", "True", "ValidationError", message)],
        "completionTime": T, "replicaStatuses": {"Worker": {}}, "readyWorkers": "0/30000"}
    assert world.cluster.events == [Event("Normal", "MPIJobCreated", "MPIJob default/test is created."),
                                    Event("Warning", "ValidationError", message)]
    job = huge_job(30_000)
    job["status"] = world.cluster.status_written()
    world.cluster.given(MPIJOBS, job)
    assert await world.sync() == "finished"
    assert world.cluster.actions == [("update_status", "mpijobs", "test")], "refused once, then left alone"
