"""The IndexedJob worker backend in a sync (docs/reconciler.md, "Worker backends"): the worker Job created once the
job runs and never beside a predecessor being deleted, the pod of each index (a replacement over the pod it
replaces), discover_hosts.sh from hostnames in numeric order, scaling, suspension, cleanPodPolicy, and the flag
that moves no existing job."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.mpijob import builders
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.mpijob.policy_decisions import with_attempt
from reconciler.mpijob.status import Event
from reconciler.mpijob.worker_backends import with_backend_label
from reconciler.runtime.api_resources import JOBS, PODS, SERVICES
from reconciler.settings import Settings
from shared.api.v2_spec_annotation import canonical_json
from shared.jsondict import JSONDict
from tests.unit.reconciler.test_sync import EARLIER, T, World, condition, created_condition, defaulted, new_mpijob
from tests.unit.reconciler.test_sync_failure_policy import evicted, policy_job, running_status

INDEXED = {"mpijobs.kubeflow.org/worker-backend": "IndexedJob"}
WORKER_JOB_UID = "worker-job-uid"


def indexed_job(workers: int, **spec: Any) -> JSONDict:
    job = new_mpijob(workers=workers, **spec)
    job["metadata"]["annotations"] = dict(INDEXED)
    return job


def add_dependencies(world: World) -> None:
    """The Service (labelled with the backend, as the reconciler made it), ConfigMap and Secret."""
    assert world.job is not None
    world.add_dependencies()
    world.cluster.given(SERVICES, with_backend_label(builders.build_service(defaulted(world.job)), "IndexedJob"))


def given_worker_job(world: World, *, replicas: int | None = None, deleting: bool = False,
                     suspend: bool = False) -> JSONDict:
    assert world.job is not None
    job = builders.build_worker_job(defaulted(world.job))
    job["metadata"]["uid"] = WORKER_JOB_UID
    if replicas is not None:
        job["spec"]["parallelism"] = job["spec"]["completions"] = replicas
    if deleting:
        job["metadata"]["deletionTimestamp"] = T
        job["metadata"]["finalizers"] = ["foregroundDeletion"]
    if suspend:
        job["spec"]["suspend"] = True
    return world.cluster.given(JOBS, job)


def given_pod(world: World, index: int, phase: str, *, suffix: str = "abcde", created: str = EARLIER,
              ready: bool | None = None, deleting: bool = False, ranked: bool = True) -> JSONDict:
    """A pod the Job controller made for ``index``: name with a random suffix, the index label, the forced hostname,
    and (unless not ``ranked``) the rank label the webhook's pod mutation adds."""
    assert world.job is not None
    template = builders.build_worker_job_template(defaulted(world.job))
    rank = {"training.kubeflow.org/replica-index": str(index)} if ranked else {}
    metadata: JSONDict = {
        "name": f"test-worker-{index}-{suffix}", "namespace": "default", "uid": f"pod-{index}-{suffix}",
        "creationTimestamp": created,
        "labels": {**template["metadata"]["labels"], "batch.kubernetes.io/job-completion-index": str(index), **rank},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "test-worker", "uid": WORKER_JOB_UID,
                             "controller": True, "blockOwnerDeletion": True}]}
    if deleting:
        metadata["deletionTimestamp"] = T
    status: JSONDict = {"phase": phase}
    if ready if ready is not None else phase == "Running":
        status["conditions"] = [{"type": "Ready", "status": "True"}]
    return world.cluster.given(PODS, {"metadata": metadata, "spec": {**template["spec"],
                                                                     "hostname": f"test-worker-{index}"},
                                      "status": status})


async def test_the_first_sync_creates_the_worker_job_and_no_pod() -> None:
    job = indexed_job(4)
    world = World(job)
    await world.sync()
    assert world.cluster.actions == [
        ("create", "services", "test"), ("create", "configmaps", "test-config"), ("create", "secrets", "test-ssh"),
        ("create", "jobs", "test-worker"), ("create", "jobs", "test-launcher"), ("update_status", "mpijobs", "test")]
    assert world.cluster.created("jobs", "test-worker") == builders.build_worker_job(defaulted(job))
    service = world.cluster.created("services", "test")
    assert service["metadata"]["labels"] == {"app": "test", "mpijobs.kubeflow.org/worker-backend": "IndexedJob"}
    assert world.cluster.status_written()["replicaStatuses"] == {"Launcher": {}, "Worker": {}}
    assert world.cluster.status_written()["readyWorkers"] == "0/4"


async def test_the_flag_makes_a_new_job_an_indexed_one() -> None:
    world = World(new_mpijob(workers=2))
    world.reconciler.shared.settings = Settings(default_worker_backend="IndexedJob")
    await world.sync()
    assert ("create", "jobs", "test-worker") in world.cluster.actions
    assert not [a for a in world.cluster.actions if a[1] == "pods"]


async def test_a_job_the_flag_makes_indexed_is_refused_when_its_worker_job_could_not_carry_the_template() -> None:
    """The webhook checks the IndexedJob rules for jobs that name the backend; one that gets it from the flag (or
    was stored without the webhook) is refused at its first sync, before anything is created."""
    job = new_mpijob(workers=2)
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["hostname"] = "fixed"
    job["status"] = {}
    world = World(job)
    world.reconciler.shared.settings = Settings(default_worker_backend="IndexedJob")
    assert await world.sync() == "refused"
    message = ("Found validation errors: spec.mpiReplicaSpecs[Worker].template.spec.hostname: Forbidden: must not be "
               "set with the IndexedJob worker backend: the Job controller names each worker's host "
               "<job>-worker-<index>")
    assert world.cluster.actions == [("update_status", "mpijobs", "test")]
    assert world.cluster.status_written() == {
        "conditions": [condition("WorkersReady", "False", "MPIJobFinished", "MPIJob finished: workers are released"),
                       created_condition(), condition("Failed", "True", "ValidationError", message)],
        "completionTime": T, "replicaStatuses": {"Worker": {}}, "readyWorkers": "0/2"}
    world = World(job)  # the same job under the default backend runs: the hostname is upstream's to accept
    assert await world.sync() == "synced"


async def test_the_flag_does_not_move_a_job_whose_workers_exist() -> None:
    """Its workers say (here without a Service: the pods alone decide)."""
    world = World(new_mpijob(workers=2))
    world.add_workers(2, "Running", ready=True)
    world.reconciler.shared.settings = Settings(default_worker_backend="IndexedJob")
    await world.sync()
    assert not [a for a in world.cluster.actions if a[1] == "jobs" and a[2] == "test-worker"]
    assert world.cluster.created("services", "test") == builders.build_service(defaulted(new_mpijob(workers=2)))


async def test_each_index_is_its_newest_pod_not_being_deleted_and_hosts_are_listed_by_hostname() -> None:
    world = World(indexed_job(11))
    add_dependencies(world)
    given_worker_job(world)
    for index in range(11):
        given_pod(world, index, "Running")
    given_pod(world, 3, "Failed", suffix="older", created="2026-11-29T10:00:00Z")  # the pod index 3 replaced
    given_pod(world, 5, "Running", suffix="leaving", created=T, deleting=True)  # newer, but being deleted
    world.add_launcher(suspend=False, pods=[{"phase": "Running"}])
    world.publish_workers()
    await world.sync()
    status = world.cluster.status_written()
    assert status["replicaStatuses"]["Worker"] == {"active": 11}
    assert status["readyWorkers"] == "11/11"
    patches = [body for verb, plural, name, body in world.cluster.writes if (verb, plural) == ("patch", "configmaps")]
    script = patches[-1]["patch"]["data"]["discover_hosts.sh"]
    assert script == "#!/bin/sh\n" + "".join(f"echo test-worker-{i}.test.default.svc\n" for i in range(11))
    assert [a for a in world.cluster.actions if a[1] in ("jobs", "pods")] == [], "nothing to create or patch"


async def test_an_evicted_worker_ends_the_job_even_once_replaced() -> None:
    """As upstream's evicted workers do (v2beta1): the Job controller's replacement does not hide the eviction."""
    world = World(indexed_job(2))
    add_dependencies(world)
    given_worker_job(world)
    given_pod(world, 0, "Running")
    evicted = given_pod(world, 1, "Failed")
    evicted["status"].update(reason="Evicted", message="The node was low on resource: memory.")
    world.cluster.given(PODS, evicted)
    given_pod(world, 1, "Running", suffix="fghij", created=T)  # its replacement
    world.add_launcher(suspend=False, pods=[{"phase": "Running"}])
    await world.sync()
    status = world.cluster.status_written()
    assert condition("Failed", "True", "MPIJobEvicted", "1/2 workers are evicted") in status["conditions"]
    assert status["replicaStatuses"]["Worker"] == {"active": 1, "failed": 1}


async def test_the_pods_not_made_yet_are_pending() -> None:
    world = World(indexed_job(3))
    add_dependencies(world)
    given_worker_job(world)
    given_pod(world, 1, "Running")
    world.add_launcher(suspend=False)
    await world.sync()
    status = world.cluster.status_written()
    assert status["readyWorkers"] == "1/3"
    assert [c for c in status["conditions"] if c["type"] == "WorkersReady"] == [
        condition("WorkersReady", "False", "WorkersStarting", "2/3 workers pending: waiting to start")]


@pytest.mark.parametrize(("had", "wants"), [(4, 6), (6, 3)])
async def test_a_scale_patches_parallelism_and_completions(had: int, wants: int) -> None:
    world = World(indexed_job(wants))
    add_dependencies(world)
    given_worker_job(world, replicas=had)
    world.add_launcher(suspend=False)
    await world.sync()
    job_writes = [(verb, name, body.get("patch")) for verb, plural, name, body in world.cluster.writes
                  if plural == "jobs"]
    assert job_writes == [("patch", "test-worker", {"spec": {"parallelism": wants, "completions": wants}})]


async def test_suspending_deletes_the_worker_job_in_the_foreground() -> None:
    world = World(indexed_job(2, runPolicy={"cleanPodPolicy": "Running", "suspend": True}))
    add_dependencies(world)
    given_worker_job(world)
    given_pod(world, 0, "Running")
    given_pod(world, 1, "Succeeded")
    world.add_launcher(suspend=True)
    await world.sync()
    deletes = [(name, body["propagationPolicy"]) for verb, plural, name, body in world.cluster.writes
               if (verb, plural) == ("delete", "jobs")]
    assert deletes == [("test-worker", "Foreground")]
    assert not [a for a in world.cluster.actions if a[1] == "pods"]


async def test_a_resume_waits_for_the_suspended_worker_job_to_go() -> None:
    world = World(indexed_job(2))
    add_dependencies(world)
    given_worker_job(world, deleting=True)
    given_pod(world, 0, "Running", deleting=True)
    world.add_launcher(suspend=False)
    await world.sync()
    assert [a for a in world.cluster.actions if a[1] in ("jobs", "pods")] == [], "no create, no second delete"
    assert world.cluster.status_written()["readyWorkers"] == "0/2"


async def test_a_create_that_meets_a_predecessor_being_deleted_waits() -> None:
    """The cache no longer shows the old Job, the API server still has it (being deleted): 409, read, wait."""
    world = World(indexed_job(2))
    add_dependencies(world)
    old = builders.build_worker_job(defaulted(indexed_job(2)))
    old["metadata"].update(uid="old", deletionTimestamp=T, finalizers=["foregroundDeletion"])
    world.cluster.given(JOBS, old, cached=False)
    world.add_launcher(suspend=False)
    await world.sync()
    assert [a for a in world.cluster.actions if a[1] in ("jobs", "pods")] == []
    assert ("jobs", "test-worker") in world.cluster.reads


def finished(job: JSONDict) -> JSONDict:
    job["status"] = {"conditions": [created_condition(), condition("Succeeded", "True", "MPIJobSucceeded", "done")],
                     "startTime": EARLIER, "completionTime": T,
                     "replicaStatuses": {"Launcher": {"succeeded": 1}, "Worker": {"active": 2}}}
    return job


@pytest.mark.parametrize(("policy", "writes"), [
    pytest.param("All", [("delete", {"propagationPolicy": "Background"})], id="all-deletes-the-job"),
    pytest.param("Running", [("patch", {"patch": {"spec": {"suspend": True}}})], id="running-suspends-the-job"),
    pytest.param("None", [], id="none-leaves-it"),
])
async def test_clean_pod_policy_of_a_finished_job(policy: str, writes: list[tuple[str, JSONDict]]) -> None:
    world = World(finished(indexed_job(2, runPolicy={"cleanPodPolicy": policy})))
    add_dependencies(world)
    given_worker_job(world)
    given_pod(world, 0, "Running")
    given_pod(world, 1, "Succeeded")
    world.add_launcher(conditions=[{"type": "Complete", "status": "True"}])
    await world.sync()
    assert [(verb, {k: v for k, v in body.items() if k != "metadata"}) for verb, plural, _, body
            in world.cluster.writes if plural in ("jobs", "pods")] == writes


async def test_a_finished_job_s_suspended_worker_job_is_left_alone() -> None:
    world = World(finished(indexed_job(2, runPolicy={"cleanPodPolicy": "Running"})))
    add_dependencies(world)
    given_worker_job(world, suspend=True)
    world.add_launcher(conditions=[{"type": "Complete", "status": "True"}])
    await world.sync()
    assert [a for a in world.cluster.actions if a[1] in ("jobs", "pods")] == []


async def test_the_annotation_of_a_job_made_by_another_backend_is_not_followed() -> None:
    """A job whose Service was made without the backend label (by the Pods backend, or an older operator) keeps
    Pods even when annotated IndexedJob afterwards (by a client the webhook did not check)."""
    job = new_mpijob(workers=2)
    world = World(job)
    world.add_dependencies()
    job["metadata"]["annotations"] = dict(INDEXED)
    world.cluster.given(MPIJOBS, job)
    await world.sync()
    assert [a for a in world.cluster.actions if a[1] in ("jobs", "pods")][:2] == [
        ("create", "pods", "test-worker-0"), ("create", "pods", "test-worker-1")]


async def test_a_worker_pod_the_webhook_did_not_rank_is_reported_once() -> None:
    world = World(indexed_job(3))
    add_dependencies(world)
    given_worker_job(world)
    given_pod(world, 0, "Running")
    given_pod(world, 1, "Running", ranked=False)
    given_pod(world, 2, "Pending", ranked=False)
    world.add_launcher(suspend=False)
    await world.sync()
    assert [e for e in world.cluster.events if e.reason == "WorkerWithoutReplicaIndex"] == [Event(
        "Warning", "WorkerWithoutReplicaIndex", "2/3 worker pods have no training.kubeflow.org/replica-index label "
        "(the webhook's pod mutation was not called), first test-worker-1-abcde: Kueue's topology-aware scheduling "
        "places them without their rank order")]
    world.cluster.events.clear()
    world.cluster.catch_up()
    await world.sync()
    assert [e for e in world.cluster.events if e.reason == "WorkerWithoutReplicaIndex"] == []


# ---- a worker that ended Succeeded (sshd exits 0 on SIGTERM): the Job controller counts its index completed

LOST_MESSAGE = ("worker index 1 (test-worker-1) ended Succeeded and its pod is gone: the Job controller does not "
                "replace a completed index, so it is taken out of test-worker's status.completedIndexes and the "
                "worker is made again")


def lost_worker_world(launcher_running: bool) -> World:
    """Two workers: index 0 Running, index 1 deleted, its pod ended Succeeded and gone, its index completed; the
    launcher held (WaitForWorkersReady) or running."""
    world = World(indexed_job(2, launcherCreationPolicy="WaitForWorkersReady"))
    add_dependencies(world)
    job = given_worker_job(world)
    world.cluster.given(JOBS, {**job, "status": {"active": 1, "succeeded": 1, "completedIndexes": "1"}})
    given_pod(world, 0, "Running")
    if launcher_running:
        world.add_launcher(suspend=False, pods=[{"phase": "Running"}])
    else:
        world.add_launcher(suspend=True)
    return world


def job_writes(world: World) -> list[tuple[str, str, JSONDict]]:
    return [(verb, name, body.get("status", body)) for verb, plural, name, body in world.cluster.writes
            if plural == "jobs"]


@pytest.mark.parametrize("launcher_running", [False, True], ids=["launcher-held", "launcher-running"])
async def test_a_completed_index_whose_pod_is_gone_is_made_again(launcher_running: bool) -> None:
    """As the Pods backend makes a deleted worker again: the index leaves status.completedIndexes (the Job read
    fresh), nothing is deleted, the other workers stay; one Warning event, not repeated once the Job shows it."""
    world = lost_worker_world(launcher_running)
    await world.sync()
    assert job_writes(world) == [("update_status", "test-worker", {"active": 1, "succeeded": 0,
                                                                   "completedIndexes": ""})]
    assert ("jobs", "test-worker") in world.cluster.reads
    assert [e for e in world.cluster.events if e.reason == "WorkerIndexCompleted"] == [
        Event("Warning", "WorkerIndexCompleted", LOST_MESSAGE)]
    world.cluster.events.clear()
    world.cluster.writes.clear()
    world.cluster.catch_up()
    await world.sync()
    assert job_writes(world) == []
    assert [e for e in world.cluster.events if e.reason == "WorkerIndexCompleted"] == []


async def test_a_completed_index_the_job_no_longer_lists_is_left_alone() -> None:
    """The cache is behind: the Job read fresh already lists no such index (the Job controller made it again)."""
    world = lost_worker_world(launcher_running=False)
    assert world.job is not None
    fresh = given_worker_job(world)
    world.cluster.server[("jobs", "default", "test-worker")] = {**fresh, "status": {"active": 2}}
    await world.sync()
    assert job_writes(world) == []
    assert [e for e in world.cluster.events if e.reason == "WorkerIndexCompleted"] == []


@pytest.mark.parametrize("deleting", [False, True], ids=["pod-kept", "pod-being-deleted"])
async def test_a_completed_index_whose_pod_is_still_there_is_left_alone(deleting: bool) -> None:
    """A Succeeded pod that stays stands for its index (under Pods it stays Succeeded too); one being deleted still
    holds the Job controller's tracking finalizer, which counts it again: the index waits until the pod is gone."""
    world = lost_worker_world(launcher_running=False)
    given_pod(world, 1, "Succeeded", deleting=deleting)
    await world.sync()
    assert job_writes(world) == []
    assert [e for e in world.cluster.events if e.reason == "WorkerIndexCompleted"] == []


async def test_a_completed_index_beyond_the_replicas_is_left_alone() -> None:
    """A scale-down's: the Job controller drops indexes beyond completions itself."""
    world = World(indexed_job(1))
    add_dependencies(world)
    job = given_worker_job(world)
    world.cluster.given(JOBS, {**job, "status": {"active": 1, "succeeded": 1, "completedIndexes": "1"}})
    given_pod(world, 0, "Running")
    world.add_launcher(suspend=False, pods=[{"phase": "Running"}])
    await world.sync()
    assert [w for w in job_writes(world) if w[0] == "update_status"] == []


# ---- the failurePolicy (v2) through the worker Job

def policy_world(rules: list[JSONDict], attempt: int = 0) -> World:
    """A running IndexedJob job with a failurePolicy, its worker Job and two Running pods at ``attempt``."""
    job = policy_job(1, running_status())
    job["metadata"]["annotations"].update(INDEXED)
    policy = {"spec": {"runPolicy": {"failurePolicy": {"maxRestarts": 1, "rules": rules}}}}
    job["metadata"]["annotations"]["mpijobs.kubeflow.org/v2-spec"] = canonical_json(policy)
    world = World(job)
    add_dependencies(world)
    worker_job = with_attempt(builders.build_worker_job(defaulted(job)), attempt)
    worker_job["metadata"]["uid"] = WORKER_JOB_UID
    world.cluster.given(JOBS, worker_job)
    launcher = with_attempt(builders.build_launcher_job(defaulted(job)), attempt)
    launcher["metadata"]["uid"] = "launcher-uid"
    launcher["status"] = {"active": 1}
    world.cluster.given(JOBS, launcher)
    for index in range(2):
        pod = given_pod(world, index, "Running")
        pod["metadata"]["labels"]["mpijobs.kubeflow.org/restart-attempt"] = str(attempt)
        world.cluster.given(PODS, pod)
    return world


def fail_pod(world: World, index: int, status: JSONDict) -> None:
    pod = world.cluster.server[("pods", "default", f"test-worker-{index}-abcde")]
    world.cluster.given(PODS, {**pod, "status": status})


async def test_a_restart_job_rule_deletes_the_worker_job_in_the_foreground() -> None:
    world = policy_world([{"name": "disrupted", "action": "RestartJob",
                           "onPodConditions": [{"status": "True", "type": "DisruptionTarget"}]}])
    fail_pod(world, 1, evicted())
    assert await world.sync() == "restarted"
    deletes = [(name, body["propagationPolicy"]) for verb, plural, name, body in world.cluster.writes
               if verb == "delete"]
    assert deletes == [("test-launcher", "Foreground"), ("test-worker", "Foreground")]
    assert world.cluster.status_written()["restartCount"] == 1
    # the next sync: the worker Job of attempt 0 still being deleted, nothing is made
    world.cluster.catch_up()
    assert world.job is not None
    terminating = with_attempt(builders.build_worker_job(defaulted(world.job)), 0)
    terminating["metadata"].update(uid=WORKER_JOB_UID, deletionTimestamp=T)
    world.cluster.given(JOBS, terminating)
    world.cluster.writes.clear()
    assert await world.sync() == "restarting"
    assert [a for a in world.cluster.actions if a[0] in ("create", "delete")] == []
    # gone: the next attempt's worker Job, labelled
    world.cluster.server.pop(("jobs", "default", "test-worker"))
    world.cluster.catch_up()
    await world.sync()
    assert world.cluster.created("jobs", "test-worker") == with_attempt(
        builders.build_worker_job(defaulted(world.job)), 1)


async def test_a_fail_job_rule_on_a_worker_s_exit_code_fails_the_job() -> None:
    world = policy_world([{"name": "bad", "action": "FailJob", "onReplicaTypes": ["Worker"],
                           "onExitCodes": {"operator": "In", "values": [3]}}])
    fail_pod(world, 0, {"phase": "Failed", "containerStatuses": [
        {"name": "foo", "state": {"terminated": {"exitCode": 3, "finishedAt": T}}}]})
    assert await world.sync() == "failed"
    failed = [c for c in world.cluster.status_written()["conditions"] if c["type"] == "Failed"]
    assert failed == [condition("Failed", "True", "FailJobFailurePolicyAction",
                                'MPIJob default/test has failed by rule "bad": Worker pod test-worker-0-abcde: '
                                "container foo exited with 3")]
