"""The IndexedJob worker backend on the real control plane (docs/reconciler.md, "Worker backends"): the real Job
controller of kube-controller-manager makes the workers, kwok runs them.

The worker Job is compared whole with ``build_worker_job``; its pods have the Pods backend's hostnames (and new names
when replaced); the ConfigMap is byte for byte the Pods backend's for the same job; suspend, resume, scale, finish
(cleanPodPolicy All and Running) and a failurePolicy restart act through the Job; the operator's default moves no
existing job. Worker templates carry ``test.mpijob/outcome: hang``: kwok otherwise completes every pod a Job owns.
"""

from __future__ import annotations

from typing import Any

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import mpijob
from reconciler.mpijob import builders
from shared.api.v2_spec_annotation import canonical_json
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl
from tests.integration.test_reconciler_objects import built_from, without_server_fields

JSON = dict[str, Any]
HANG = {"test.mpijob/outcome": "hang"}
BACKEND = "mpijobs.kubeflow.org/worker-backend"
INDEX = "batch.kubernetes.io/job-completion-index"
RANK = "training.kubeflow.org/replica-index"
ATTEMPT = "mpijobs.kubeflow.org/restart-attempt"
BATCH = "batch/v1"


@pytest.fixture
def jobs(cluster: LocalCluster, namespace: str, reconciler: ReconcilerControl) -> Jobs:
    return Jobs(cluster, namespace)


def spec(name: str, workers: int, *, backend: str | None = "IndexedJob", launcher: dict[str, str] | None = None,
         **fields: Any) -> JSON:
    """An MPIJob whose workers (and, unless told, launcher) run until deleted."""
    job = mpijob(name, workers, launcher_labels=HANG if launcher is None else launcher, **fields)
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"] = {"labels": dict(HANG)}
    if backend is not None:
        job["metadata"]["annotations"] = {BACKEND: backend}
    return job


def worker_job(jobs: Jobs, name: str) -> JSON | None:
    return jobs.object("jobs", f"{name}-worker", BATCH)


def running(jobs: Jobs, name: str, count: int, timeout: float = 90) -> dict[int, JSON]:
    """The job's Running worker pods by completion index, once there are exactly ``count`` (one per index)."""
    def found() -> dict[int, JSON] | None:
        pods = [p for p in jobs.workers(name) if p["status"].get("phase") == "Running"]
        by_index = {int(p["metadata"]["labels"][INDEX]): p for p in pods}
        return by_index if len(pods) == count == len(by_index) else None

    return until(found, timeout=timeout, what=f"{count} Running workers of {name}")


def discover_hosts(jobs: Jobs, name: str, indexes: list[int], timeout: float = 60) -> str:
    """``discover_hosts.sh`` once it lists exactly the workers of ``indexes``, in that order."""
    want = "#!/bin/sh\n" + "".join(f"echo {name}-worker-{i}.{name}.{jobs.ns}.svc\n" for i in indexes)
    return str(until(lambda: (jobs.must("configmaps", f"{name}-config")["data"] or {}).get("discover_hosts.sh") == want
                     and want, timeout=timeout, what=f"discover_hosts.sh of {name} listing {indexes}"))


def test_the_worker_job_its_pods_and_the_config_map_of_eleven_workers(jobs: Jobs) -> None:
    jobs.create(spec("pi", 11))
    pods = running(jobs, "pi", 11)
    stored = worker_job(jobs, "pi")
    assert stored is not None
    desired = builders.build_worker_job(built_from(jobs.get("pi")))
    assert without_server_fields(stored, desired) == desired
    for index, pod in pods.items():
        assert pod["spec"]["hostname"] == f"pi-worker-{index}"
        assert pod["spec"]["subdomain"] == "pi"
        assert pod["metadata"]["name"].startswith(f"pi-worker-{index}-")
        assert [ref["name"] for ref in pod["metadata"]["ownerReferences"]] == ["pi-worker"]
        assert pod["metadata"]["labels"][RANK] == str(index), "the webhook's pod mutation ranks it"
    discover_hosts(jobs, "pi", list(range(11)))  # worker-10 after worker-2: numeric order
    ready = jobs.wait_condition("pi", "WorkersReady")
    assert ready["message"] == "11/11 workers ready"
    until(lambda: jobs.get("pi")["status"].get("replicaStatuses", {}).get("Worker") == {"active": 11}, timeout=30,
          what="replicaStatuses.Worker active 11")
    status = jobs.get("pi")["status"]
    assert status["readyWorkers"] == "11/11"
    assert status["replicaStatuses"]["Launcher"] == {"active": 1}
    indexed_data = jobs.must("configmaps", "pi-config")["data"]
    assert [e for e in jobs.events("pi") if e["reason"] == "WorkerWithoutReplicaIndex"] == []

    # the same job on the Pods backend, under the same name in the same namespace: the same ConfigMap, byte for byte
    jobs.delete("pi")
    jobs.wait_gone("mpijobs", "pi", "kubeflow.org/v2beta1")
    jobs.wait_gone("configmaps", "pi-config", timeout=60)
    jobs.create(spec("pi", 11, backend="Pods"))
    jobs.wait_workers("pi", 11, "Running", timeout=90)
    discover_hosts(jobs, "pi", list(range(11)))
    assert jobs.must("configmaps", "pi-config")["data"] == indexed_data
    assert worker_job(jobs, "pi") is None


def test_a_deleted_worker_comes_back_with_its_hostname_under_a_new_name(jobs: Jobs) -> None:
    jobs.create(spec("pi", 4))
    before = running(jobs, "pi", 4)
    name = before[3]["metadata"]["name"]
    jobs.cluster.rest.request("DELETE", jobs.path("pods", name))
    # the kubelet's part, which kwok's pod-delete stage leaves out: a deleted pod's containers are stopped and its
    # phase made terminal before it goes; the Job controller waits for that (its job-tracking finalizer holds the
    # pod) before it replaces the pod (podReplacementPolicy: Failed)
    killed = [{"name": "main", "state": {"terminated": {"exitCode": 143, "reason": "Error"}}}]
    jobs.cluster.rest.request("PATCH", jobs.path("pods", name) + "/status", {"status": {
        "phase": "Failed", "containerStatuses": killed}}, content_type="application/merge-patch+json")

    def replaced() -> JSON | None:
        pods = [p for p in jobs.workers("pi") if p["status"].get("phase") == "Running"
                and p["metadata"]["labels"][INDEX] == "3"]
        return pods[0] if len(pods) == 1 and pods[0]["metadata"]["uid"] != before[3]["metadata"]["uid"] else None

    after = until(replaced, timeout=90, what="worker 3 replaced")
    assert after["spec"]["hostname"] == "pi-worker-3"
    assert after["metadata"]["name"] != before[3]["metadata"]["name"]
    assert after["metadata"]["name"].startswith("pi-worker-3-")
    discover_hosts(jobs, "pi", [0, 1, 2, 3])


def test_a_deleted_worker_that_exits_0_comes_back_with_its_hostname(jobs: Jobs) -> None:
    """Upstream's workers run ``sshd -De``, which exits 0 on SIGTERM: the deleted pod ends Succeeded and the Job
    controller counts its index completed, which it never makes again. The reconciler takes the index out of the
    Job's completedIndexes once the pod is gone, so the Job controller makes it again: the same Job, the same
    hostname, the other workers untouched; one Warning event. The launcher's pod is held (no mpirun yet)."""
    job = spec("pi", 3)
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["schedulingGates"] = [{"name": "test.mpijob/hold"}]
    jobs.create(job)
    before = running(jobs, "pi", 3)
    first = worker_job(jobs, "pi")
    assert first is not None
    name = before[1]["metadata"]["name"]
    jobs.cluster.rest.request("DELETE", jobs.path("pods", name))
    # the kubelet's part, which kwok's pod-delete stage leaves out: sshd stopped by SIGTERM exits 0
    stopped = [{"name": "main", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]
    jobs.cluster.rest.request("PATCH", jobs.path("pods", name) + "/status", {"status": {
        "phase": "Succeeded", "containerStatuses": stopped}}, content_type="application/merge-patch+json")

    def replaced() -> dict[int, JSON] | None:
        pods = [p for p in jobs.workers("pi") if p["status"].get("phase") == "Running"]
        by_index = {int(p["metadata"]["labels"][INDEX]): p for p in pods}
        done = len(pods) == 3 == len(by_index) and by_index[1]["metadata"]["uid"] != before[1]["metadata"]["uid"]
        return by_index if done else None

    after = until(replaced, timeout=90, what="worker 1 made again")
    assert after[1]["spec"]["hostname"] == "pi-worker-1"
    assert after[1]["metadata"]["name"].startswith("pi-worker-1-")
    assert {i: p["metadata"]["uid"] for i, p in after.items() if i != 1} == {
        i: p["metadata"]["uid"] for i, p in before.items() if i != 1}, "the other workers are left as they were"
    again = worker_job(jobs, "pi")
    assert again is not None
    assert again["metadata"]["uid"] == first["metadata"]["uid"], "the same worker Job"
    assert not again["status"].get("completedIndexes")
    lost = [e for e in jobs.events("pi") if e["reason"] == "WorkerIndexCompleted"]
    assert [(e["type"], e["message"], e.get("count", 1)) for e in lost] == [(
        "Warning", "worker index 1 (pi-worker-1) ended Succeeded and its pod is gone: the Job controller does not "
        "replace a completed index, so it is taken out of pi-worker's status.completedIndexes and the worker is made "
        "again", 1)]
    discover_hosts(jobs, "pi", [0, 1, 2])
    launchers = jobs.pods("training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role=launcher")
    assert [p["status"].get("phase") for p in launchers] == ["Pending"], "mpirun never started"


def test_suspend_deletes_the_worker_job_and_resume_makes_a_new_one(jobs: Jobs) -> None:
    jobs.create(spec("pi", 3))
    running(jobs, "pi", 3)
    first = worker_job(jobs, "pi")
    assert first is not None
    jobs.patch("pi", {"spec": {"runPolicy": {"suspend": True}}})
    jobs.wait_condition("pi", "Suspended")
    jobs.wait_gone("jobs", "pi-worker", BATCH, timeout=60)
    jobs.wait_workers("pi", 0, timeout=60)
    jobs.patch("pi", {"spec": {"runPolicy": {"suspend": False}}})
    pods = running(jobs, "pi", 3)
    second = worker_job(jobs, "pi")
    assert second is not None
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert not second["spec"].get("suspend"), "never created suspended"
    assert sorted(p["spec"]["hostname"] for p in pods.values()) == ["pi-worker-0", "pi-worker-1", "pi-worker-2"]
    jobs.wait_condition("pi", "Suspended", status="False")


def test_scale_four_to_six_to_three(jobs: Jobs) -> None:
    jobs.create(spec("pi", 4))
    running(jobs, "pi", 4)
    for replicas in (6, 3):
        jobs.patch("pi", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": replicas}}}})
        pods = running(jobs, "pi", replicas)
        assert sorted(pods) == list(range(replicas))
        job = worker_job(jobs, "pi")
        assert job is not None
        assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (replicas, replicas)
        discover_hosts(jobs, "pi", list(range(replicas)))
        hostfile = jobs.must("configmaps", "pi-config")["data"]["hostfile"]
        assert hostfile == "".join(f"pi-worker-{i}.pi.{jobs.ns}.svc slots=1\n" for i in range(replicas))
        until(lambda r=replicas: jobs.get("pi")["status"].get("readyWorkers") == f"{r}/{r}",  # type: ignore[misc]
              timeout=30, what=f"readyWorkers {replicas}/{replicas}")


@pytest.mark.parametrize("policy", ["All", "Running"])
def test_a_finished_job_cleans_its_workers_up_through_the_job(jobs: Jobs, policy: str) -> None:
    """The launcher starts once every worker is Ready and succeeds 3 s later (kwok): All deletes the worker Job;
    Running suspends it, so the Job controller deletes its running pods and the Job stays."""
    job = spec("pi", 3, launcher={}, launcherCreationPolicy="WaitForWorkersReady")
    job["spec"]["runPolicy"]["cleanPodPolicy"] = policy
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"] = {"annotations": {"test.mpijob/run-for": "3s"}}
    jobs.create(job)
    running(jobs, "pi", 3)
    jobs.wait_condition("pi", "Succeeded", timeout=90)
    if policy == "All":
        jobs.wait_gone("jobs", "pi-worker", BATCH, timeout=60)
    else:
        until(lambda: (worker_job(jobs, "pi") or {}).get("spec", {}).get("suspend") is True, timeout=60,
              what="the worker Job suspended")
    jobs.wait_workers("pi", 0, timeout=60)
    assert jobs.get("pi")["status"]["replicaStatuses"]["Worker"] == {}
    if policy == "Running":
        assert worker_job(jobs, "pi") is not None, "the Job (and the history of its pods) is kept"


def test_an_evicted_worker_ends_the_job_though_the_job_controller_replaces_it(jobs: Jobs) -> None:
    jobs.create(spec("pi", 2))
    pods = running(jobs, "pi", 2)
    jobs.cluster.rest.request("PATCH", jobs.path("pods", pods[1]["metadata"]["name"]) + "/status", {"status": {
        "phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}},
        content_type="application/merge-patch+json")
    failed = jobs.wait_condition("pi", "Failed", timeout=60)
    assert (failed["reason"], failed["message"]) == ("MPIJobEvicted", "1/2 workers are evicted")
    until(lambda: (worker_job(jobs, "pi") or {}).get("spec", {}).get("suspend") is True, timeout=60,
          what="the worker Job suspended (cleanPodPolicy Running)")
    jobs.wait_workers("pi", 1, "Failed", timeout=60)  # the evicted pod stays, for its history


def test_a_restart_job_rule_makes_the_worker_job_anew(jobs: Jobs) -> None:
    """A worker disrupted (Failed with DisruptionTarget, as the kubelet leaves an evicted pod) restarts the job: the
    worker Job is deleted and made again under its name with the next attempt's label, same hostnames."""
    rule = {"name": "disrupted", "action": "RestartJob", "onPodConditions": [{"type": "DisruptionTarget"}]}
    job = spec("pi", 2)
    job["metadata"]["annotations"]["mpijobs.kubeflow.org/v2-spec"] = canonical_json(
        {"spec": {"runPolicy": {"failurePolicy": {"maxRestarts": 1, "rules": [rule]}}}})
    jobs.create(job)
    pods = running(jobs, "pi", 2)
    first = worker_job(jobs, "pi")
    assert first is not None
    assert first["metadata"]["labels"][ATTEMPT] == "0"
    disrupted = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                 "message": "Eviction API: evicting", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    jobs.cluster.rest.request("PATCH", jobs.path("pods", pods[1]["metadata"]["name"]) + "/status", {"status": {
        "phase": "Failed", "reason": "Evicted", "message": "evicted", "conditions": [disrupted]}},
        content_type="application/merge-patch+json")
    until(lambda: jobs.get("pi")["status"].get("restartCount") == 1, timeout=60, what="restartCount 1")

    def next_attempt() -> JSON | None:
        job = worker_job(jobs, "pi")
        return job if job is not None and job["metadata"]["uid"] != first["metadata"]["uid"] else None

    second = until(next_attempt, timeout=90, what="the next attempt's worker Job")
    assert second["metadata"]["labels"][ATTEMPT] == "1"
    assert second["spec"]["template"]["metadata"]["labels"][ATTEMPT] == "1"
    again = running(jobs, "pi", 2)
    assert {p["metadata"]["labels"][ATTEMPT] for p in again.values()} == {"1"}
    assert sorted(p["spec"]["hostname"] for p in again.values()) == ["pi-worker-0", "pi-worker-1"]
    jobs.wait_condition("pi", "Running", timeout=60)


def test_the_operator_s_default_moves_no_existing_job(jobs: Jobs, reconciler: ReconcilerControl) -> None:
    jobs.create(spec("plain", 2, backend=None))
    plain = jobs.wait_workers("plain", 2, "Running", timeout=90)
    assert [p["metadata"]["name"] for p in plain] == ["plain-worker-0", "plain-worker-1"]
    try:
        reconciler.restart("--default-worker-backend=IndexedJob")
        jobs.create(spec("indexed", 2, backend=None))
        running(jobs, "indexed", 2)
        assert worker_job(jobs, "indexed") is not None, "a new job takes the flag's backend"
        jobs.patch("plain", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 3}}}})
        grown = jobs.wait_workers("plain", 3, "Running", timeout=90)
        assert [p["metadata"]["name"] for p in grown] == ["plain-worker-0", "plain-worker-1", "plain-worker-2"]
        assert [p["metadata"]["uid"] for p in grown[:2]] == [p["metadata"]["uid"] for p in plain]
        assert worker_job(jobs, "plain") is None
    finally:
        reconciler.restart()
    # back on the default (Pods): the IndexedJob job keeps its Job, and grows through it
    indexed_pods = running(jobs, "indexed", 2)
    jobs.patch("indexed", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 3}}}})
    grown_indexed = running(jobs, "indexed", 3)
    assert {i: p["metadata"]["uid"] for i, p in grown_indexed.items() if i < 2} == {
        i: p["metadata"]["uid"] for i, p in indexed_pods.items()}
    assert [p for p in jobs.workers("indexed") if p["metadata"]["name"] == "indexed-worker-2"] == []


def test_under_run_launcher_as_worker_the_ranks_start_at_one(jobs: Jobs) -> None:
    """The launcher is rank 0: the worker of index i is ranked i + 1 (the template's offset, the webhook's sum), and
    the hostfile lists the launcher first, as the Pods backend's does."""
    jobs.create(spec("pi", 2, runLauncherAsWorker=True))
    pods = running(jobs, "pi", 2)
    assert {i: p["metadata"]["labels"][RANK] for i, p in pods.items()} == {0: "1", 1: "2"}
    hostfile = jobs.must("configmaps", "pi-config")["data"]["hostfile"]
    assert hostfile == "".join(f"{host}.pi.{jobs.ns}.svc slots=1\n" for host in ("pi-launcher", "pi-worker-0",
                                                                                  "pi-worker-1"))


def test_a_native_gang_holds_the_worker_job_s_pods_and_the_launcher(jobs: Jobs, reconciler: ReconcilerControl) -> None:
    """With --gang-scheduling=kube-scheduler the worker template names the job's PodGroup (per job, not per index),
    so kube-scheduler places the Job controller's pods and the launcher as one gang (minCount = workers + 1)."""
    native = "scheduling.k8s.io/v1alpha2"
    reconciler.restart("--gang-scheduling=kube-scheduler")
    try:
        jobs.create(spec("pi", 3))
        pods = running(jobs, "pi", 3)
        assert {i: p["spec"].get("schedulingGroup") for i, p in pods.items()} == {
            i: {"podGroupName": "pi"} for i in range(3)}
        group = until(lambda: jobs.object("podgroups", "pi", native), timeout=30, what="the job's PodGroup")
        assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
        job = worker_job(jobs, "pi")
        assert job is not None
        assert job["spec"]["template"]["spec"]["schedulingGroup"] == {"podGroupName": "pi"}
        jobs.wait_condition("pi", "Running", timeout=60)
    finally:
        reconciler.restart()
