"""The sync loop against a recording fake of our Cluster seam: upstream's controller unit cases
(spec/controller.md 6.1), comparing the ordered writes and whole status objects."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from reconciler.mpijob import builders
from reconciler.mpijob.builders import SSHKeyPair
from reconciler.mpijob.caches import Caches
from reconciler.mpijob.children import SERVICE_NAME_LABEL
from reconciler.mpijob.context import Shared
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.mpijob.errors import ResourceExistsError
from reconciler.mpijob.metrics import OperatorMetrics
from reconciler.mpijob.status import Event
from reconciler.mpijob.sync import Reconciler
from reconciler.runtime.api_resources import CONFIG_MAPS, ENDPOINT_SLICES, JOBS, PODS, SECRETS, SERVICES
from reconciler.runtime.client import ApiError
from reconciler.settings import Settings
from shared.api import MPIJob, names
from shared.jsondict import JSONDict
from tests.unit.helpers import with_defaults
from tests.unit.reconciler.fake_cluster import FakeCluster

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
T = "2026-11-29T12:00:00Z"
EARLIER = "2026-11-29T11:00:00Z"
KEYS = SSHKeyPair(b"-----BEGIN EC PRIVATE KEY-----\nfixed\n-----END EC PRIVATE KEY-----\n",
                  b"ecdsa-sha2-nistp521 AAAA\n")
CONTAINER = {"name": "foo", "image": "bar"}


def new_mpijob(name: str = "test", workers: int = 0, implementation: str = "OpenMPI", **spec: Any) -> JSONDict:
    """Upstream's ``newMPIJob``: namespace default, cleanPodPolicy All, one container per template."""
    replica_specs: JSONDict = {"Launcher": {"replicas": 1, "template": {"spec": {"containers": [dict(CONTAINER)]}}}}
    if workers:
        replica_specs["Worker"] = {"replicas": workers, "template": {"spec": {"containers": [dict(CONTAINER)]}}}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": name, "namespace": "default", "uid": "job-uid", "resourceVersion": "7"},
            "spec": {"mpiImplementation": implementation, "runPolicy": {"cleanPodPolicy": "All"},
                     "mpiReplicaSpecs": replica_specs, **spec}}


def defaulted(job: JSONDict) -> MPIJob:
    return with_defaults(MPIJob.model_validate(job))


class World:
    """A fake cluster, its caches and a reconciler with a fixed clock and key pair."""

    def __init__(self, job: JSONDict | None = None) -> None:
        self.caches = Caches()
        self.cluster = FakeCluster(self.caches)
        self.metrics = OperatorMetrics(CollectorRegistry())
        self.reconciler = Reconciler(Shared(self.caches, self.cluster, Settings(), lambda: KEYS), self.metrics,
                                     lambda: NOW)
        self.job = job
        if job is not None:
            self.cluster.given(MPIJOBS, job)

    async def sync(self, key: str = "default/test") -> str:
        return await self.reconciler.sync(key)

    def add_workers(self, count: int, phase: str = "", ready: bool = False, start: int = 0,
                    published: bool | None = None) -> None:
        """Worker pods ``start`` to ``start + count - 1``; Ready ones are also ``published`` (by default)."""
        assert self.job is not None
        for index in range(start, start + count):
            pod = builders.build_worker(defaulted(self.job), index)
            pod["metadata"]["uid"] = f"worker-{index}"
            pod["status"] = {"phase": phase} if phase else {}
            if ready:
                pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
            self.cluster.given(PODS, pod)
        if published if published is not None else ready:
            self.publish_workers()

    def publish_workers(self) -> None:
        """What the endpoints controller does moments after a worker is Ready: one EndpointSlice of the job's
        Service lists every worker pod on the server, each with its hostname and readiness."""
        assert self.job is not None
        service = names.service_name(self.job["metadata"]["name"])
        pods = [pod for (plural, _, _), pod in self.cluster.server.items()
                if plural == "pods" and pod["metadata"]["name"].startswith(f"{service}-worker-")]
        endpoints = [{"addresses": [f"10.0.0.{i + 1}"], "hostname": pod["spec"]["hostname"],
                      "conditions": {"ready": any(c["type"] == "Ready" and c["status"] == "True"
                                                  for c in (pod.get("status") or {}).get("conditions") or [])},
                      "targetRef": {"kind": "Pod", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}}
                     for i, pod in enumerate(pods)]
        self.cluster.given(ENDPOINT_SLICES, {"metadata": {
            "name": f"{service}-abcde", "namespace": "default", "labels": {SERVICE_NAME_LABEL: service}},
            "addressType": "IPv4", "endpoints": endpoints})

    def add_launcher(self, *, suspend: bool | None = None, conditions: list[JSONDict] | None = None,
                     status: JSONDict | None = None, pods: list[JSONDict] | None = None) -> JSONDict:
        assert self.job is not None
        launcher = builders.build_launcher_job(defaulted(self.job))
        launcher["metadata"]["uid"] = "launcher-uid"
        if suspend is not None:
            launcher["spec"]["suspend"] = suspend
        launcher["status"] = {**(status or {}), **({"conditions": conditions} if conditions else {})}
        for i, pod_status in enumerate(pods or []):
            labels = launcher["spec"]["template"]["metadata"]["labels"]
            self.cluster.given(PODS, {"metadata": {
                "name": f"{launcher['metadata']['name']}-{i}", "namespace": "default", "labels": labels,
                "uid": f"launcher-pod-{i}", "creationTimestamp": pod_status.pop("created", T),
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": launcher["metadata"]["name"],
                                     "uid": "launcher-uid", "controller": True}]}, "status": pod_status})
        return self.cluster.given(JOBS, launcher)

    def add_dependencies(self, running_workers: list[str] | None = None) -> None:
        job = defaulted(self.job or {})
        self.cluster.given(SERVICES, builders.build_service(job))
        running = [{"metadata": {"name": n, "namespace": "default"}} for n in running_workers or []]
        self.cluster.given(CONFIG_MAPS, builders.build_config_map(job, "", running))
        self.cluster.given(SECRETS, builders.build_ssh_secret(job, KEYS))


def created_condition(name: str = "test") -> JSONDict:
    return {"type": "Created", "status": "True", "reason": "MPIJobCreated",
            "message": f"MPIJob default/{name} is created.", "lastUpdateTime": T, "lastTransitionTime": T}


def condition(kind: str, status: str, reason: str, message: str, at: str = T) -> JSONDict:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastUpdateTime": at,
            "lastTransitionTime": at}


def workers_ready(status: str, reason: str, message: str, at: str = T) -> JSONDict:
    """Our WorkersReady condition (not upstream's), always first in the list."""
    return condition("WorkersReady", status, reason, message, at)


def finished_workers() -> JSONDict:
    return workers_ready("False", "MPIJobFinished", "MPIJob finished: workers are released")


def suspended_workers(at: str = T) -> JSONDict:
    return workers_ready("False", "MPIJobSuspended", "MPIJob suspended: workers are released", at)


def never_running() -> JSONDict:
    """The synthetic Running=False a finished job gets when it never had a Running condition."""
    return condition("Running", "False", "MPIJobRunning",
                     "MPIJob default/test is finished but Running condition was never set.")


def suspended_conditions(at: str = T) -> list[JSONDict]:
    """Suspended=True and Running=False/MPIJobSuspended, as every suspended sync sets them."""
    return [condition("Suspended", "True", "MPIJobSuspended", "MPIJob suspended", at),
            condition("Running", "False", "MPIJobSuspended", "MPIJob default/test is suspended.", at)]


def unowned(obj: JSONDict) -> JSONDict:
    obj = copy.deepcopy(obj)
    obj["metadata"].pop("ownerReferences", None)
    return obj


async def test_invalid_key_does_nothing() -> None:
    world = World()
    assert await world.sync("foo/bar/baz") == "invalid key"
    assert world.cluster.actions == []


async def test_nonexistent_mpijob_does_nothing() -> None:
    world = World()
    assert await world.sync("default/foo") == "not found"
    assert world.cluster.actions == []


async def test_invalid_mpijob_only_gets_a_validation_event() -> None:
    world = World({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                   "metadata": {"name": "foo", "namespace": "bar", "uid": "u"}})
    assert await world.sync("bar/foo") == "invalid"
    assert world.cluster.actions == []
    assert world.cluster.events == [Event("Warning", "ValidationError", "Found validation errors: "
                                          "spec.mpiReplicaSpecs: Required value: must have replica specs")]


async def test_mpijob_managed_externally_is_left_alone() -> None:
    world = World(new_mpijob(workers=1, runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"}))
    assert await world.sync() == "managed by kueue.x-k8s.io/multikueue"
    assert world.cluster.actions == []
    assert world.cluster.events == []


MIRRORED = {  # statuses Kueue's MultiKueue copies from a worker cluster onto the manager's job
    "running": {"conditions": [created_condition(), condition("Running", "True", "MPIJobRunning", "running")],
                "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 2}}, "startTime": T},
    "succeeded": {"conditions": [created_condition(), condition("Succeeded", "True", "MPIJobSucceeded", "done")],
                  "replicaStatuses": {"Launcher": {"succeeded": 1}, "Worker": {}}, "startTime": T,
                  "completionTime": T},
    "failed": {"conditions": [created_condition(), condition("Failed", "True", "MPIJobFailed", "failed")],
               "replicaStatuses": {"Launcher": {"failed": 1}, "Worker": {}}, "startTime": T, "completionTime": T},
}


@pytest.mark.parametrize("mirrored", list(MIRRORED), ids=list(MIRRORED))
async def test_multikueue_job_with_a_mirrored_status_is_left_alone(mirrored: str) -> None:
    """On a MultiKueue manager, whatever status Kueue copies (finished, with a TTL), and even objects named like its
    children: no write, no cleanup, no TTL deletion, no event."""
    job = new_mpijob(workers=2, runPolicy={"managedBy": "kueue.x-k8s.io/multikueue", "suspend": False,
                                           "ttlSecondsAfterFinished": 0, "cleanPodPolicy": "All"})
    job["status"] = copy.deepcopy(MIRRORED[mirrored])
    world = World(job)
    world.add_dependencies()
    world.add_workers(2, "Running")
    world.add_launcher(suspend=False)
    assert await world.sync() == "managed by kueue.x-k8s.io/multikueue"
    assert world.cluster.actions == []
    assert world.cluster.events == []


HOSTFILES = {
    "OpenMPI": "".join(f"foo-worker-{i}.foo.default.svc slots=1\n" for i in range(5)),
    "Intel": "".join(f"foo-worker-{i}.foo.default.svc:1\n" for i in range(5)),
    "MPICH": "".join(f"foo-worker-{i}.foo.default.svc:1\n" for i in range(5)),
}


@pytest.mark.parametrize("implementation", ["OpenMPI", "Intel", "MPICH"])
async def test_all_resources_created(implementation: str) -> None:
    job = new_mpijob("foo", 5, implementation)
    job["status"] = {"startTime": EARLIER}
    world = World(job)
    await world.sync("default/foo")
    assert world.cluster.actions == [
        ("create", "services", "foo"), ("create", "configmaps", "foo-config"), ("create", "secrets", "foo-ssh"),
        *[("create", "pods", f"foo-worker-{i}") for i in range(5)],
        ("create", "jobs", "foo-launcher"), ("update_status", "mpijobs", "foo"),
    ]
    expected_job = defaulted(job)
    assert world.cluster.created("configmaps", "foo-config") == builders.build_config_map(expected_job, "", [])
    assert world.cluster.created("configmaps", "foo-config")["data"] == {
        "hostfile": HOSTFILES[implementation], "discover_hosts.sh": "#!/bin/sh\n"}
    assert world.cluster.created("services", "foo") == builders.build_service(expected_job)
    assert world.cluster.created("secrets", "foo-ssh") == builders.build_ssh_secret(expected_job, KEYS)
    assert world.cluster.created("pods", "foo-worker-3") == builders.build_worker(expected_job, 3)
    assert world.cluster.created("jobs", "foo-launcher") == builders.build_launcher_job(expected_job)
    assert world.cluster.status_written() == {
        "startTime": EARLIER,
        "conditions": [workers_ready("False", "WorkersStarting", "5/5 workers pending: waiting to start"),
                       created_condition("foo")],
        "replicaStatuses": {"Launcher": {}, "Worker": {}}, "readyWorkers": "0/5"}
    assert world.cluster.events == [Event("Normal", "MPIJobCreated", "MPIJob default/foo is created.")]


@pytest.mark.parametrize(("resource", "name"), [
    (JOBS, "test-launcher"), (SERVICES, "test"), (CONFIG_MAPS, "test-config"), (SECRETS, "test-ssh")])
async def test_object_not_controlled_by_us(resource: Any, name: str) -> None:
    world = World(new_mpijob(workers=2))
    job = defaulted(new_mpijob(workers=2))
    built = {JOBS: builders.build_launcher_job(job), SERVICES: builders.build_service(job),
             CONFIG_MAPS: builders.build_config_map(job, "", []), SECRETS: builders.build_ssh_secret(job, KEYS)}
    order = [SERVICES, CONFIG_MAPS, SECRETS]
    for earlier in order[: order.index(resource)] if resource in order else []:
        world.cluster.given(earlier, built[earlier])
    world.cluster.given(resource, unowned(built[resource]))
    with pytest.raises(ResourceExistsError):
        await world.sync()
    assert [a for a in world.cluster.actions if a[0] != "create" or a[1] != resource.plural] == []
    assert world.cluster.events[-1] == Event(
        "Warning", "ErrResourceExists",
        f'Resource "{name}" of Kind "{resource.kind}" already exists and is not managed by MPIJob')


async def test_a_foreign_object_missing_from_the_cache_is_found_on_create() -> None:
    world = World(new_mpijob(workers=2))
    world.cluster.given(CONFIG_MAPS, unowned(builders.build_config_map(defaulted(new_mpijob(workers=2)), "", [])),
                        cached=False)
    with pytest.raises(ResourceExistsError, match='Resource "test-config" of Kind "ConfigMap" already exists'):
        await world.sync()


async def test_worker_not_controlled_by_us() -> None:
    world = World(new_mpijob(workers=8))
    world.add_dependencies()
    for i in range(8):
        world.cluster.given(PODS, unowned(builders.build_worker(defaulted(new_mpijob(workers=8)), i)), cached=False)
    with pytest.raises(ResourceExistsError, match='Resource "test-worker-0" of Kind "Pod"'):
        await world.sync()


async def test_launcher_succeeded() -> None:
    job = new_mpijob(workers=64)
    job["status"] = {"startTime": EARLIER, "completionTime": T}
    world = World(job)
    world.add_launcher(conditions=[{"type": "SuccessCriteriaMet", "status": "True"},
                                   {"type": "Complete", "status": "True"}])
    await world.sync()
    assert world.cluster.actions == [("update_status", "mpijobs", "test")]
    assert world.cluster.status_written() == {
        "startTime": EARLIER, "completionTime": T,
        "conditions": [
            finished_workers(),
            created_condition(),
            {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded",
             "message": "MPIJob default/test successfully completed.", "lastUpdateTime": T, "lastTransitionTime": T},
            never_running(),
        ],
        "replicaStatuses": {"Launcher": {"succeeded": 1}, "Worker": {}}, "readyWorkers": "0/64",
    }


async def test_launcher_succeeded_with_running_pod_does_not_restart_running() -> None:
    job = new_mpijob(workers=0)
    running = {"type": "Running", "status": "True", "reason": "MPIJobRunning",
               "message": "MPIJob default/test is running.", "lastUpdateTime": EARLIER, "lastTransitionTime": EARLIER}
    job["status"] = {"startTime": EARLIER, "conditions": [created_condition(), running]}
    world = World(job)
    world.add_launcher(conditions=[{"type": "Complete", "status": "True"}],
                       status={"completionTime": "2026-11-29T11:01:00Z"}, pods=[{"phase": "Running"}])
    await world.sync()
    status = world.cluster.status_written()
    assert status["conditions"] == [
        created_condition(), {**running, "status": "False"},
        {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded",
         "message": "MPIJob default/test successfully completed.", "lastUpdateTime": T, "lastTransitionTime": T}]
    assert status["completionTime"] == "2026-11-29T11:01:00Z"
    assert status["replicaStatuses"] == {"Launcher": {"succeeded": 1}, "Worker": {}}
    assert [e.reason for e in world.cluster.events] == ["MPIJobSucceeded"]


async def test_launcher_failed_takes_the_last_failed_pod_reason() -> None:
    job = new_mpijob(workers=64)
    job["status"] = {"startTime": EARLIER, "completionTime": T}
    world = World(job)
    world.add_launcher(
        conditions=[{"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded",
                     "message": "Job has reached the specified backoff limit"},
                    {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                     "message": "Job has reached the specified backoff limit"}],
        status={"failed": 2},
        pods=[{"phase": "Failed", "reason": "FailedReason1", "message": "first message",
               "created": "2026-11-29T12:00:00Z"},
              {"phase": "Failed", "reason": "FailedReason2", "message": "second message",
               "created": "2026-11-29T12:00:01Z"}])
    await world.sync()
    assert world.cluster.actions == [("update_status", "mpijobs", "test")]
    assert world.cluster.status_written() == {
        "startTime": EARLIER, "completionTime": T,
        "conditions": [
            finished_workers(),
            created_condition(),
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded/FailedReason2",
             "message": "Job has reached the specified backoff limit: second message",
             "lastUpdateTime": T, "lastTransitionTime": T},
            never_running(),
        ],
        "replicaStatuses": {"Launcher": {"failed": 2}, "Worker": {}}, "readyWorkers": "0/64",
    }
    assert world.cluster.events[-1] == Event("Warning", "BackoffLimitExceeded/FailedReason2",
                                             "Job has reached the specified backoff limit: second message")


async def test_shutdown_workers_of_a_finished_job() -> None:
    job = new_mpijob(workers=8)
    succeeded = {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded", "message": "done",
                 "lastUpdateTime": T, "lastTransitionTime": T}
    job["status"] = {"conditions": [succeeded], "startTime": EARLIER, "completionTime": T,
                     "replicaStatuses": {"Worker": {"active": 8}}}
    world = World(job)
    world.add_workers(8, "Running")
    world.add_launcher(conditions=[{"type": "Complete", "status": "True"}])
    await world.sync()
    assert world.cluster.actions == [*[("delete", "pods", f"test-worker-{i}") for i in range(8)],
                                     ("update_status", "mpijobs", "test")]
    assert world.cluster.status_written()["replicaStatuses"] == {"Worker": {}}


async def test_finished_job_with_clean_pod_policy_running_keeps_finished_workers() -> None:
    job = new_mpijob(workers=3, runPolicy={"cleanPodPolicy": "Running"})
    job["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": "x", "message": "y"}],
                     "completionTime": T}
    world = World(job)
    world.add_workers(1, "Running")
    world.add_workers(1, "Succeeded", start=1)
    world.add_workers(1, "Pending", start=2)
    await world.sync()
    assert world.cluster.actions == [("delete", "pods", "test-worker-0"), ("delete", "pods", "test-worker-2"),
                                     ("update_status", "mpijobs", "test")]


@pytest.mark.parametrize("implementation", ["OpenMPI", "Intel", "MPICH"])
async def test_create_suspended_mpijob(implementation: str) -> None:
    world = World(new_mpijob(workers=8, implementation=implementation, runPolicy={"cleanPodPolicy": "All",
                                                                                 "suspend": True}))
    await world.sync()
    assert world.cluster.actions == [
        ("create", "services", "test"), ("create", "configmaps", "test-config"), ("create", "secrets", "test-ssh"),
        ("create", "jobs", "test-launcher"), ("update_status", "mpijobs", "test")]
    assert world.cluster.created("jobs", "test-launcher")["spec"]["suspend"] is True
    assert world.cluster.status_written() == {
        "conditions": [
            suspended_workers(), created_condition(), *suspended_conditions(),
        ],
        "replicaStatuses": {"Launcher": {}, "Worker": {}}, "readyWorkers": "0/8",
    }
    assert [e.reason for e in world.cluster.events] == ["MPIJobCreated", "MPIJobSuspended"]


async def test_suspend_a_running_mpijob() -> None:
    job = new_mpijob(workers=8)
    running = {"type": "Running", "status": "True", "reason": "MPIJobRunning",
               "message": "MPIJob default/test is running.", "lastUpdateTime": EARLIER, "lastTransitionTime": EARLIER}
    job["status"] = {"conditions": [created_condition(), running], "startTime": EARLIER,
                     "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 8}}}
    world = World(job)
    world.add_dependencies([f"test-worker-{i}" for i in range(8)])
    world.add_workers(8, "Running")
    world.add_launcher(suspend=False, pods=[{"phase": "Running"}])
    job["spec"]["runPolicy"]["suspend"] = True
    world.cluster.given(MPIJOBS, job)
    await world.sync()
    assert world.cluster.actions == [("patch", "jobs", "test-launcher"),
                                     *[("delete", "pods", f"test-worker-{i}") for i in range(8)],
                                     ("update_status", "mpijobs", "test")]
    assert world.cluster.writes[0][3]["patch"] == {"spec": {"suspend": True}}
    assert world.cluster.status_written() == {
        "startTime": EARLIER,
        "conditions": [
            suspended_workers(), created_condition(), *suspended_conditions(),
        ],
        "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {}}, "readyWorkers": "0/8",
    }


def suspended_job() -> JSONDict:
    job = new_mpijob(workers=8)
    job["status"] = {"startTime": EARLIER, "replicaStatuses": {"Launcher": {}, "Worker": {}}, "conditions": [
        suspended_workers(EARLIER), created_condition(), *suspended_conditions(EARLIER)]}
    return job


@pytest.mark.parametrize("launcher_started", [False, True], ids=["launcher never started", "clears startTime"])
async def test_resume_with_edited_scheduling_directives(launcher_started: bool) -> None:
    job = suspended_job()
    world = World(job)
    job_model = defaulted(job)
    world.cluster.given(CONFIG_MAPS, builders.build_config_map(job_model, "", []))
    world.cluster.given(SECRETS, builders.build_ssh_secret(job_model, KEYS))
    world.add_launcher(suspend=True, status={"startTime": EARLIER} if launcher_started else None)
    template = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    template["metadata"] = {"annotations": {"kueue.x-k8s.io/workload": "my-workload"}}
    template["spec"].update(nodeSelector={"foo": "bar"}, schedulingGates=[{"name": "kueue.x-k8s.io/topology"}],
                            tolerations=[{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}])
    world.cluster.given(MPIJOBS, job)
    await world.sync()
    assert world.cluster.actions == [
        ("create", "services", "test"), *[("create", "pods", f"test-worker-{i}") for i in range(8)],
        *([("update_status", "jobs", "test-launcher")] if launcher_started else []),
        ("update", "jobs", "test-launcher"), ("update_status", "mpijobs", "test")]
    updated = next(body for verb, kind, _, body in world.cluster.writes if (verb, kind) == ("update", "jobs"))
    pod_spec = updated["spec"]["template"]["spec"]
    assert updated["spec"]["suspend"] is False
    assert "startTime" not in updated.get("status", {})
    assert updated["spec"]["template"]["metadata"]["annotations"] == {"kueue.x-k8s.io/workload": "my-workload"}
    assert (pod_spec["nodeSelector"], pod_spec["tolerations"], pod_spec["schedulingGates"]) == (
        {"foo": "bar"}, [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
        [{"name": "kueue.x-k8s.io/topology"}])
    status = world.cluster.status_written()
    assert status["startTime"] == T
    assert status["conditions"] == [
        workers_ready("False", "WorkersStarting", "8/8 workers pending: waiting to start", EARLIER) | {
            "lastUpdateTime": T},
        created_condition(), suspended_job()["status"]["conditions"][3],
        {"type": "Suspended", "status": "False", "reason": "MPIJobResumed", "message": "MPIJob resumed",
         "lastUpdateTime": T, "lastTransitionTime": T}]
    assert [e.reason for e in world.cluster.events] == ["MPIJobResumed"], "the workers starting again: no event"
    assert status["replicaStatuses"] == {"Launcher": {}, "Worker": {}}


async def test_unsuspend_failure_does_not_poison_the_cache() -> None:
    job = suspended_job()
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 1
    world = World(job)
    world.add_launcher(suspend=True)
    world.cluster.failures[("update", "jobs")] = ApiError(503, "ServiceUnavailable", "try later")
    with pytest.raises(ApiError):
        await world.sync()
    assert world.caches.jobs.get("default", "test-launcher")["spec"]["suspend"] is True  # type: ignore[index]


async def test_launcher_active_worker_not_ready() -> None:
    job = new_mpijob(workers=8)
    job["status"] = {"conditions": [created_condition()], "startTime": EARLIER}
    world = World(job)
    world.add_dependencies()
    world.add_workers(8, "Pending")
    world.add_launcher(pods=[{"phase": "Running"}])
    await world.sync()
    assert world.cluster.actions == [("update_status", "mpijobs", "test")]
    assert world.cluster.status_written() == {
        "conditions": [workers_ready("False", "WorkersStarting", "8/8 workers pending: waiting to start"),
                       created_condition()], "startTime": EARLIER,
        "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {}}, "readyWorkers": "0/8"}


async def test_launcher_active_workers_ready_is_running_and_says_so_once() -> None:
    job = new_mpijob(workers=8)
    job["status"] = {"conditions": [created_condition()], "startTime": EARLIER}
    world = World(job)
    world.add_dependencies([f"test-worker-{i}" for i in range(8)])
    world.add_workers(8, "Running")
    world.add_launcher(pods=[{"phase": "Running"}])
    await world.sync()
    status = world.cluster.status_written()
    assert world.cluster.actions == [("update_status", "mpijobs", "test")]
    assert status == {
        "conditions": [workers_ready("False", "WorkersStarting", "8/8 workers pending: running, not ready yet"),
                       created_condition(), {
            "type": "Running", "status": "True", "reason": "MPIJobRunning",
            "message": "MPIJob default/test is running.", "lastUpdateTime": T, "lastTransitionTime": T}],
        "startTime": EARLIER, "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 8}},
        "readyWorkers": "0/8"}
    assert world.cluster.events == [Event("Normal", "MPIJobRunning", "MPIJob default/test is running")]
    job["status"] = status
    world.cluster.given(MPIJOBS, job)
    await world.sync()
    assert world.cluster.actions == [("update_status", "mpijobs", "test")], "no second write: nothing changed"
    assert len(world.cluster.events) == 1, "the Running event is emitted once per transition"


async def test_workers_ready_create_the_launcher() -> None:
    job = new_mpijob(workers=16)
    job["status"] = {"conditions": [created_condition()], "startTime": EARLIER}
    world = World(job)
    world.add_dependencies([f"test-worker-{i}" for i in range(16)])
    world.add_workers(16, "Running")
    await world.sync()
    assert world.cluster.actions == [("create", "jobs", "test-launcher"), ("update_status", "mpijobs", "test")]
    assert world.cluster.status_written()["replicaStatuses"] == {"Launcher": {}, "Worker": {"active": 16}}


async def test_wait_for_workers_ready() -> None:
    job = new_mpijob(workers=2, launcherCreationPolicy="WaitForWorkersReady")
    job["status"] = {"conditions": [created_condition()], "startTime": EARLIER}
    world = World(job)
    world.add_dependencies([f"test-worker-{i}" for i in range(2)])
    world.add_workers(2, "Running")
    await world.sync()
    assert world.cluster.actions == [("update_status", "mpijobs", "test")]
    assert world.cluster.status_written()["replicaStatuses"] == {"Worker": {"active": 2}}
    world.cluster.catch_up()  # the next sync reads the status it wrote
    world.add_workers(2, "Running", ready=True)
    await world.sync()
    assert world.cluster.actions[1:] == [("create", "jobs", "test-launcher"), ("update_status", "mpijobs", "test")]


async def test_scale_down_deletes_the_highest_indexes_and_rewrites_the_hostfile() -> None:
    job = new_mpijob(workers=2)
    job["status"] = {"conditions": [created_condition()], "startTime": EARLIER}
    world = World(new_mpijob(workers=4))
    world.job = new_mpijob(workers=4)
    world.add_dependencies([f"test-worker-{i}" for i in range(4)])
    world.add_workers(4, "Running")
    world.job = job
    world.cluster.given(MPIJOBS, job)
    await world.sync()
    assert world.cluster.actions[:3] == [("patch", "configmaps", "test-config"), ("delete", "pods", "test-worker-3"),
                                         ("delete", "pods", "test-worker-2")]
    patch = world.cluster.writes[0][3]["patch"]
    assert patch["data"]["hostfile"] == (
        "test-worker-0.test.default.svc slots=1\ntest-worker-1.test.default.svc slots=1\n")


async def test_eviction_fails_the_job_and_sets_completion_time() -> None:
    job = new_mpijob(workers=2)
    job["status"] = {"conditions": [created_condition()], "startTime": EARLIER}
    world = World(job)
    world.add_dependencies([f"test-worker-{i}" for i in range(2)])
    world.add_workers(1, "Running")
    evicted = builders.build_worker(defaulted(job), 1)
    evicted["status"] = {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}
    world.cluster.given(PODS, evicted)
    world.add_launcher(pods=[{"phase": "Running"}])
    await world.sync()
    status = world.cluster.status_written()
    assert status["conditions"][0] == finished_workers()
    assert status["conditions"][2] == {"type": "Failed", "status": "True", "reason": "MPIJobEvicted",
                                       "message": "1/2 workers are evicted", "lastUpdateTime": T,
                                       "lastTransitionTime": T}
    assert status["completionTime"] == T
    assert status["replicaStatuses"]["Worker"] == {"active": 1, "failed": 1}
    # The sync that declares the job Failed stops its launcher: mpirun must not run on against released workers.
    assert world.cluster.actions[-2:] == [("update_status", "mpijobs", "test"), ("patch", "jobs", "test-launcher")]
    assert world.cluster.writes[-1][3]["patch"] == {"spec": {"suspend": True}}


async def test_the_syncs_after_an_eviction_clean_up_and_recreate_nothing() -> None:
    """After the eviction's sync: cleanPodPolicy applies, the suspended launcher's pods are no longer counted,
    nothing is created again, and a later sync writes nothing."""
    job = new_mpijob(workers=2)
    job["status"] = {"conditions": [created_condition()], "startTime": EARLIER}
    world = World(job)
    world.add_dependencies([f"test-worker-{i}" for i in range(2)])
    world.add_workers(1, "Running")
    evicted = builders.build_worker(defaulted(job), 1)
    evicted["status"] = {"phase": "Failed", "reason": "Evicted"}
    world.cluster.given(PODS, evicted)
    world.add_launcher(pods=[{"phase": "Running"}])
    await world.sync()
    world.cluster.catch_up()
    world.cluster.server[("pods", "default", "test-launcher-0")]["status"] = {"phase": "Failed"}  # deleted by Job
    world.cluster.catch_up()
    first = len(world.cluster.writes)
    assert await world.sync() == "finished"
    assert world.cluster.actions[first:] == [("delete", "pods", "test-worker-0"), ("delete", "pods", "test-worker-1"),
                                             ("update_status", "mpijobs", "test")]
    status = world.cluster.status_written()
    assert status["replicaStatuses"] == {"Launcher": {}, "Worker": {}}
    assert [(cond["type"], cond["status"], cond["reason"]) for cond in status["conditions"]] == [
        ("WorkersReady", "False", "MPIJobFinished"), ("Created", "True", "MPIJobCreated"),
        ("Failed", "True", "MPIJobEvicted"), ("Running", "False", "MPIJobRunning")]
    world.cluster.catch_up()
    second = len(world.cluster.writes)
    assert await world.sync() == "finished"
    assert world.cluster.actions[second:] == []


async def test_a_launcher_left_running_by_an_interrupted_eviction_sync_is_stopped() -> None:
    """The status says Failed (evicted) but the launcher Job was not suspended (the reconciler stopped between the
    two writes, or the job was evicted under another version): the next sync suspends it."""
    job = new_mpijob(workers=1)
    job["status"] = {"conditions": [created_condition(), condition("Failed", "True", "MPIJobEvicted",
                                                                   "1/1 workers are evicted")],
                     "startTime": EARLIER, "completionTime": T, "replicaStatuses": {"Launcher": {"active": 1}}}
    world = World(job)
    world.add_dependencies()
    world.add_launcher(pods=[{"phase": "Running"}])
    assert await world.sync() == "finished"
    assert world.cluster.actions == [("patch", "jobs", "test-launcher"), ("update_status", "mpijobs", "test")]
    assert world.cluster.status_written()["replicaStatuses"] == {"Launcher": {"active": 1}, "Worker": {}}


@pytest.mark.parametrize(("name", "spec"), [
    ("policy", {"launcherCreationPolicy": "waitForWorkersReady"}),
    ("extra-key", {"extraReplica": True}),
], ids=["lowercase-launcher-creation-policy", "extra-replica-spec-key"])
async def test_a_job_only_upstream_accepts_is_run_as_upstream_runs_it(name: str, spec: JSONDict) -> None:
    """Our stricter admission rules are not re-applied to stored jobs: a job the Go operator accepted runs.
    An unknown launcherCreationPolicy waits for the workers (upstream runs the launcher at start-up only for
    exactly ``AtStartup``); an extra replica spec key is ignored."""
    job = new_mpijob(workers=2, **{k: v for k, v in spec.items() if k != "extraReplica"})
    if spec.get("extraReplica"):
        job["spec"]["mpiReplicaSpecs"]["worker"] = {"replicas": 3, "template": {"spec": {"containers": [CONTAINER]}}}
    world = World(job)
    assert await world.sync() == "synced"
    creates = [("create", "services", "test"), ("create", "configmaps", "test-config"),
               ("create", "secrets", "test-ssh"), ("create", "pods", "test-worker-0"),
               ("create", "pods", "test-worker-1")]
    if name == "extra-key":
        creates.append(("create", "jobs", "test-launcher"))
    assert world.cluster.actions == [*creates, ("update_status", "mpijobs", "test")]
    assert [e.reason for e in world.cluster.events] == ["MPIJobCreated"]
