"""Gang scheduling in the sync loop: the PodGroup is created before the workers, follows the job's
scheduling policy, and is deleted on suspension and on cleanup (controller.md 2.6)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from reconciler.mpijob import builders
from reconciler.mpijob.builders import GangScheduling
from reconciler.mpijob.context import Shared
from reconciler.mpijob.custom_resources import (
    MPIJOBS,
    NATIVE_POD_GROUPS,
    NATIVE_WORKLOADS,
    SCHEDULER_PLUGINS_POD_GROUPS,
    VOLCANO_POD_GROUPS,
)
from reconciler.mpijob.errors import ResourceExistsError
from reconciler.mpijob.metrics import OperatorMetrics
from reconciler.mpijob.priorities import PriorityClassCache
from reconciler.mpijob.sync import Reconciler
from reconciler.runtime.api_resources import PRIORITY_CLASSES
from reconciler.settings import Settings
from tests.unit.reconciler.test_sync import KEYS, NOW, World, created_condition, defaulted, new_mpijob
from tests.unit.reconciler.test_sync_failure_policy import policy_job, running_status

VOLCANO = GangScheduling("volcano")
PLUGINS = GangScheduling("scheduler-plugins-scheduler")


def gang_world(job: dict[str, Any], gang: GangScheduling) -> World:
    world = World(job)
    world.reconciler = Reconciler(Shared(world.caches, world.cluster, Settings(gang=gang), lambda: KEYS),
                                  OperatorMetrics(CollectorRegistry()), lambda: NOW)
    return world


@pytest.mark.parametrize("gang", [VOLCANO, PLUGINS], ids=["volcano", "scheduler-plugins"])
async def test_pod_group_before_workers_and_decorated_pods(gang: GangScheduling) -> None:
    job = new_mpijob(workers=2)
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["priorityClassName"] = "high"
    world = gang_world(job, gang)
    world.cluster.given(PRIORITY_CLASSES, {"metadata": {"name": "high"}, "value": 1000})
    await world.sync()
    assert world.cluster.actions == [
        ("create", "services", "test"), ("create", "configmaps", "test-config"), ("create", "secrets", "test-ssh"),
        ("create", "podgroups", "test"), ("create", "pods", "test-worker-0"), ("create", "pods", "test-worker-1"),
        ("create", "jobs", "test-launcher"), ("update_status", "mpijobs", "test")]
    model = defaulted(job)
    assert world.cluster.created("podgroups", "test") == builders.build_pod_group(model, gang, {"high": 1000}.get)
    worker = world.cluster.created("pods", "test-worker-0")
    assert worker == builders.build_worker(model, 0, gang)
    assert worker["spec"]["schedulerName"] == gang.scheduler_name
    assert world.cluster.created("jobs", "test-launcher") == builders.build_launcher_job(model, gang)


async def test_pod_group_follows_the_scheduling_policy() -> None:
    job = new_mpijob(workers=2)
    job["status"] = {"conditions": [created_condition()], "startTime": "2026-11-29T11:00:00Z"}
    world = gang_world(job, PLUGINS)
    world.add_dependencies(["test-worker-0", "test-worker-1"])
    world.add_workers(2, "Running")
    world.add_launcher(pods=[{"phase": "Running"}])
    world.cluster.given(SCHEDULER_PLUGINS_POD_GROUPS, builders.build_pod_group(defaulted(job), PLUGINS))
    changed = copy.deepcopy(job)
    changed["spec"]["runPolicy"]["schedulingPolicy"] = {"scheduleTimeoutSeconds": 10, "minAvailable": 2}
    world.cluster.given(MPIJOBS, changed)
    await world.sync()
    assert world.cluster.actions == [("update", "podgroups", "test"), ("update_status", "mpijobs", "test")]
    updated = world.cluster.writes[0][3]
    assert updated["spec"] == builders.build_pod_group(defaulted(changed), PLUGINS)["spec"]
    assert (updated["spec"]["minMember"], updated["spec"]["scheduleTimeoutSeconds"]) == (2, 10)


async def test_suspension_deletes_the_pod_group() -> None:
    job = new_mpijob(workers=2, runPolicy={"cleanPodPolicy": "None", "suspend": True})
    world = gang_world(job, VOLCANO)
    world.cluster.given(VOLCANO_POD_GROUPS, builders.build_pod_group(defaulted(job), VOLCANO))
    await world.sync()
    assert ("delete", "podgroups", "test") in world.cluster.actions
    assert not [a for a in world.cluster.actions if a[:2] == ("create", "pods")]


async def test_a_foreign_pod_group_blocks_the_job() -> None:
    job = new_mpijob(workers=2)
    world = gang_world(job, VOLCANO)
    foreign = builders.build_pod_group(defaulted(job), VOLCANO)
    foreign["metadata"].pop("ownerReferences")
    world.cluster.given(VOLCANO_POD_GROUPS, foreign, cached=False)
    with pytest.raises(ResourceExistsError, match='Resource "test" of Kind "PodGroup" already exists'):
        await world.sync()
    assert not [a for a in world.cluster.actions if a[:2] == ("create", "pods")]


def running_gang_world(gang: GangScheduling, scheduling_policy: dict[str, Any]) -> tuple[World, dict[str, Any]]:
    """A job whose workers and launcher run, with the given schedulingPolicy; its PodGroup not yet given."""
    job = new_mpijob(workers=2)
    job["spec"]["runPolicy"]["schedulingPolicy"] = scheduling_policy
    job["status"] = {"conditions": [created_condition()], "startTime": "2026-11-29T11:00:00Z"}
    world = gang_world(job, gang)
    world.add_dependencies(["test-worker-0", "test-worker-1"])
    world.add_workers(2, "Running")
    world.add_launcher(pods=[{"phase": "Running"}])
    return world, job


def pod_group_writes(world: World) -> list[tuple[str, str, str]]:
    return [action for action in world.cluster.actions if action[1] == "podgroups"]


@pytest.mark.parametrize("gang", [VOLCANO, PLUGINS], ids=["volcano", "scheduler-plugins"])
async def test_a_pod_group_equal_by_value_is_not_rewritten(gang: GangScheduling) -> None:
    """Another spelling of the same quantities, an absent zero-valued field and a field we do not own (as a
    schema default or another controller leaves them) are no change."""
    world, job = running_gang_world(gang, {"minResources": {"cpu": "1", "memory": "1Gi"}})
    stored = builders.build_pod_group(defaulted(job), gang)
    stored["spec"] |= {"minResources": {"cpu": "1000m", "memory": "1024Mi"}, "minTaskMember": {"worker": 2}}
    resource = VOLCANO_POD_GROUPS if gang.is_volcano else SCHEDULER_PLUGINS_POD_GROUPS
    if not gang.is_volcano:
        stored["spec"]["scheduleTimeoutSeconds"] = 0
    world.cluster.given(resource, stored)
    await world.sync()
    world.cluster.catch_up()
    await world.sync()
    assert pod_group_writes(world) == []
    assert world.cluster.server[("podgroups", "default", "test")]["spec"] == stored["spec"]


async def test_a_changed_pod_group_keeps_the_fields_we_do_not_own() -> None:
    world, job = running_gang_world(PLUGINS, {"minAvailable": 2})
    stored = builders.build_pod_group(defaulted(job), PLUGINS)
    stored["spec"] |= {"minMember": 3, "minTaskMember": {"worker": 2}}
    world.cluster.given(SCHEDULER_PLUGINS_POD_GROUPS, stored)
    await world.sync()
    assert pod_group_writes(world) == [("update", "podgroups", "test")]
    assert world.cluster.writes[0][3]["spec"] == {"minMember": 2, "scheduleTimeoutSeconds": 0,
                                                  "minTaskMember": {"worker": 2}}


async def test_priority_classes_are_read_once_per_ttl() -> None:
    world, job = running_gang_world(VOLCANO, {})
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["priorityClassName"] = "high"
    world.cluster.given(MPIJOBS, job)
    world.cluster.given(PRIORITY_CLASSES, {"metadata": {"name": "high"}, "value": 1000})
    now = [0.0]
    world.reconciler.shared.priority_classes = PriorityClassCache(ttl=30.0, clock=lambda: now[0])
    for at in (0.0, 10.0, 29.9, 30.0, 45.0):
        now[0] = at
        await world.sync()
        world.cluster.catch_up()
    assert [read for read in world.cluster.reads if read[0] == "priorityclasses"] == [
        ("priorityclasses", "high"), ("priorityclasses", "high")]
    assert pod_group_writes(world) == [("create", "podgroups", "test")]


NATIVE = GangScheduling("kube-scheduler")


async def test_native_workload_and_pod_group_before_workers() -> None:
    job = new_mpijob(workers=2)
    world = gang_world(job, NATIVE)
    await world.sync()
    assert world.cluster.actions == [
        ("create", "services", "test"), ("create", "configmaps", "test-config"), ("create", "secrets", "test-ssh"),
        ("create", "workloads", "test"), ("create", "podgroups", "test"), ("create", "pods", "test-worker-0"),
        ("create", "pods", "test-worker-1"), ("create", "jobs", "test-launcher"), ("update_status", "mpijobs", "test")]
    model = defaulted(job)
    assert world.cluster.created("workloads", "test") == builders.build_workload(model)
    assert world.cluster.created("podgroups", "test") == builders.build_native_pod_group(model)
    worker = world.cluster.created("pods", "test-worker-0")
    assert worker == builders.build_worker(model, 0, NATIVE)
    assert worker["spec"]["schedulingGroup"] == {"podGroupName": "test"}
    assert "schedulerName" not in worker["spec"]
    launcher = world.cluster.created("jobs", "test-launcher")
    assert launcher["spec"]["template"]["spec"]["schedulingGroup"] == {"podGroupName": "test"}


def stored_native(job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The job's Workload and PodGroup as the API server stores them (with the fields it adds)."""
    workload = builders.build_workload(defaulted(job))
    workload["spec"]["podGroupTemplates"][0]["schedulingConstraints"] = None
    group = builders.build_native_pod_group(defaulted(job))
    group["spec"]["disruptionMode"] = "Pod"
    group["metadata"]["finalizers"] = ["scheduling.k8s.io/podgroup-protection"]
    return workload, group


async def test_a_steady_native_gang_is_not_rewritten() -> None:
    world, job = running_gang_world(NATIVE, {})
    workload, group = stored_native(job)
    world.cluster.given(NATIVE_WORKLOADS, workload)
    world.cluster.given(NATIVE_POD_GROUPS, group)
    await world.sync()
    world.cluster.catch_up()
    await world.sync()
    assert [a for a in world.cluster.actions if a[1] in ("workloads", "podgroups")] == []


async def test_a_changed_native_gang_is_deleted_to_be_made_anew() -> None:
    world, job = running_gang_world(NATIVE, {})
    workload, group = stored_native(job)
    world.cluster.given(NATIVE_WORKLOADS, workload)
    world.cluster.given(NATIVE_POD_GROUPS, group)
    changed = copy.deepcopy(job)
    changed["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": 2}
    world.cluster.given(MPIJOBS, changed)
    await world.sync()
    assert [a for a in world.cluster.actions if a[1] in ("workloads", "podgroups")] == [
        ("delete", "workloads", "test"), ("delete", "podgroups", "test")]
    world.cluster.catch_up()
    await world.sync()
    assert world.cluster.created("workloads", "test") == builders.build_workload(defaulted(changed))
    assert world.cluster.created("podgroups", "test")["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}


async def test_suspension_deletes_the_native_gang() -> None:
    job = new_mpijob(workers=2, runPolicy={"cleanPodPolicy": "None", "suspend": True})
    world = gang_world(job, NATIVE)
    workload, group = stored_native(job)
    world.cluster.given(NATIVE_WORKLOADS, workload)
    world.cluster.given(NATIVE_POD_GROUPS, group)
    await world.sync()
    assert [a for a in world.cluster.actions if a[1] in ("workloads", "podgroups")] == [
        ("delete", "podgroups", "test"), ("delete", "workloads", "test")]


def terminating_native_group(world: World, job: dict[str, Any]) -> None:
    """The job's PodGroup of an earlier gang, being deleted (its finalizer waits for the pods that name it);
    its Workload is gone already."""
    _, group = stored_native(job)
    group["metadata"]["deletionTimestamp"] = "2026-11-29T11:59:00Z"
    group["spec"]["schedulingPolicy"] = {"gang": {"minCount": 1}}
    world.cluster.given(NATIVE_POD_GROUPS, group)


async def test_no_worker_names_a_terminating_native_pod_group_a_scale_up_waits_for_the_new_gang() -> None:
    world, job = running_gang_world(NATIVE, {})
    scaled = copy.deepcopy(job)
    scaled["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 3
    world.cluster.given(MPIJOBS, scaled)
    terminating_native_group(world, job)
    assert await world.sync() == "synced"
    assert [a for a in world.cluster.actions if a[0] != "update_status"] == [
        ("patch", "configmaps", "test-config"), ("create", "workloads", "test")], "no pod, no PodGroup yet"
    del world.cluster.server[("podgroups", "default", "test")]  # the last pod naming it is gone
    world.cluster.catch_up()
    writes = len(world.cluster.actions)
    assert await world.sync() == "synced"
    assert [a for a in world.cluster.actions[writes:] if a[0] != "update_status"] == [
        ("create", "podgroups", "test"), ("create", "pods", "test-worker-2")]
    assert world.cluster.created("podgroups", "test") == builders.build_native_pod_group(defaulted(scaled))
    assert world.cluster.created("podgroups", "test")["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}


async def test_a_quick_resume_waits_for_the_old_native_pod_group_to_go() -> None:
    """Resumed before the suspension's PodGroup was gone: no worker is created and the launcher Job is not
    resumed until it is, then both start under a PodGroup made anew."""
    job = new_mpijob(workers=2)
    job["status"] = {"conditions": [created_condition()], "startTime": "2026-11-29T11:00:00Z"}
    world = gang_world(job, NATIVE)
    world.add_dependencies()
    world.add_launcher(suspend=True)
    terminating_native_group(world, job)
    await world.sync()
    assert [a for a in world.cluster.actions if a[0] != "update_status"] == [("create", "workloads", "test")]
    del world.cluster.server[("podgroups", "default", "test")]
    world.cluster.catch_up()
    writes = len(world.cluster.actions)
    await world.sync()
    assert world.cluster.actions[writes:] == [
        ("create", "podgroups", "test"), ("create", "pods", "test-worker-0"), ("create", "pods", "test-worker-1"),
        ("update", "jobs", "test-launcher")], "the launcher Job resumed (its startTime was unset: no status write)"


async def test_a_restart_makes_its_workers_only_once_the_old_native_pod_group_is_gone() -> None:
    """After a failurePolicy restart's teardown (the old attempt's pods gone, the PodGroup not yet): nothing is
    created; then the next attempt's workers and launcher Job start under a new PodGroup."""
    status = {**running_status(restarts=1), "conditions": [created_condition()]}
    del status["startTime"]
    job = policy_job(status=status)
    world = gang_world(job, NATIVE)
    world.add_dependencies()
    terminating_native_group(world, job)
    await world.sync()
    assert [a for a in world.cluster.actions if a[0] != "update_status"] == [("create", "workloads", "test")]
    del world.cluster.server[("podgroups", "default", "test")]
    world.cluster.catch_up()
    writes = len(world.cluster.actions)
    await world.sync()
    assert [a for a in world.cluster.actions[writes:] if a[0] != "update_status"] == [
        ("create", "podgroups", "test"), ("create", "pods", "test-worker-0"), ("create", "pods", "test-worker-1"),
        ("create", "jobs", "test-launcher")]
    assert world.cluster.created("pods", "test-worker-0")["metadata"]["labels"][
        "mpijobs.kubeflow.org/restart-attempt"] == "1"
