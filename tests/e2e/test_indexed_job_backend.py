"""The IndexedJob worker backend on the real node (docs/reconciler.md, "Worker backends"): upstream's pi examples and
the project's netcheck with the backend switched, the workers made by the real Job controller, run by the kubelet,
ranked by the webhook's pod mutation, reached over ssh through CoreDNS.

- pi with each MPI (Open MPI 5 and 4, MPICH, Intel MPI; non-root, as upstream ships them): Succeeded, every rank on a
  worker; each worker is a pod of the Indexed Job ``<job>-worker`` with the hostname ``<job>-worker-<i>`` and the rank
  label ``training.kubeflow.org/replica-index`` equal to its completion index (the webhook ran).
- The same job under Pods and under IndexedJob, one after the other under one name in one namespace: the ConfigMap's
  hostfile and ``discover_hosts.sh`` (both workers Running) byte for byte the same.
- A worker pod deleted while the job waits comes back under a new name with its hostname, and the job then
  succeeds: upstream's workers run ``sshd -De``, which exits 0 on SIGTERM, so the deleted pod ends Succeeded and the
  Job controller counts its index completed, which the reconciler takes out of the worker Job's completedIndexes.
- netcheck (Open MPI 5), whose example waits for its workers (WaitForWorkersReady): no launcher before both workers are
  Ready, then point-to-point traffic between them.
- Upstream's feature specs that apply: a failing launcher ends Failed with its reason; suspended, then resumed (the
  worker Job made only after the resume), the job succeeds; the launcher as a worker is rank 0 and the worker's rank
  label is its index plus one.
- ``--default-worker-backend=IndexedJob`` on the deployed reconciler: a job that says nothing gets the worker Job.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from hack.devcluster import HarnessError, LocalCluster
from hack.devcluster.mpijobs import JSON, conditions, diagnostics, get_job, launcher_log, wait_finished
from hack.devcluster.rest import ApiError
from hack.devcluster.wait import wait_for
from tests.e2e.held import held_pi, is_running, let_go, wait_held
from tests.e2e.jobs import (
    apply,
    assert_pi,
    reconciler_flag,
    reconciler_syncs,
    run_to_success,
    upstream_pi,
    wait_synced_again,
)
from tests.e2e.test_netcheck import assert_netcheck, netcheck_job

BACKEND = "mpijobs.kubeflow.org/worker-backend"
INDEX = "batch.kubernetes.io/job-completion-index"  # the Job controller's label
RANK = "training.kubeflow.org/replica-index"  # the webhook's pod mutation's label
MPIS = ["openmpi", "openmpi4", "mpich", "intel"]


def indexed(job: JSON) -> JSON:
    """`job` with its workers switched to an Indexed Job by the v2beta1 annotation, nothing else changed."""
    job["metadata"].setdefault("annotations", {})[BACKEND] = "IndexedJob"
    return job


def _spec(job: JSON, replica: str) -> Any:
    return job["spec"]["mpiReplicaSpecs"][replica]["template"]["spec"]


def _get(cluster: LocalCluster, path: str) -> JSON | None:
    try:
        found: JSON = cluster.rest.get(path)
    except ApiError as err:
        if err.status == 404:
            return None
        raise
    return found


def worker_job(cluster: LocalCluster, namespace: str, name: str) -> JSON | None:
    return _get(cluster, f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}-worker")


def worker_pods(cluster: LocalCluster, namespace: str, name: str) -> list[JSON]:
    """The job's worker pods (by the operator's labels), those being deleted included."""
    selector = f"training.kubeflow.org/job-name={name},training.kubeflow.org/job-role=worker"
    items: list[JSON] = cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}")["items"]
    return items


def _running(pod: JSON) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")


def _ready(pod: JSON) -> bool:
    found = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in found)


def assert_job_workers(cluster: LocalCluster, namespace: str, name: str, replicas: int,
                       offset: int = 0) -> dict[int, JSON]:
    """The job's workers are exactly the pods of its Indexed worker Job, one per index, none replaced: pod
    ``<job>-worker-<i>-<random>``, hostname ``<job>-worker-<i>`` in the job's Service's subdomain, controlled by the
    worker Job (itself controlled by the MPIJob), rank label the index plus `offset`. Returns them by index."""
    mpijob = get_job(cluster, namespace, name)
    job = worker_job(cluster, namespace, name)
    assert job is not None, diagnostics(cluster, namespace)
    assert job["metadata"]["ownerReferences"] == [{
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": name, "uid": mpijob["metadata"]["uid"],
        "controller": True, "blockOwnerDeletion": True}], job["metadata"]
    assert {k: job["spec"].get(k) for k in ("completionMode", "completions", "parallelism")} == {
        "completionMode": "Indexed", "completions": replicas, "parallelism": replicas}, job["spec"]
    pods = worker_pods(cluster, namespace, name)
    by_index = {int(p["metadata"]["labels"][INDEX]): p for p in pods}
    assert len(pods) == replicas, [p["metadata"] for p in pods]
    assert sorted(by_index) == list(range(replicas)), [p["metadata"] for p in pods]
    owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": f"{name}-worker", "uid": job["metadata"]["uid"],
              "controller": True, "blockOwnerDeletion": True}]
    for index, pod in by_index.items():
        meta = pod["metadata"]
        assert meta["name"].startswith(f"{name}-worker-{index}-"), meta["name"]
        assert meta["ownerReferences"] == owner, meta
        assert meta["labels"][RANK] == str(index + offset), meta["labels"]
        assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == (f"{name}-worker-{index}", name), pod["spec"]
    events = cluster.rest.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    assert [e for e in events if e.get("reason") == "WorkerWithoutReplicaIndex"] == []
    return by_index


@pytest.mark.parametrize("mpi", MPIS)
def test_upstream_pi_on_indexed_job_workers(real_cluster: LocalCluster, namespace: str, mpi: str) -> None:
    """Upstream's example as shipped (non-root) plus the annotation; cleanPodPolicy None keeps the workers to look
    at once the job has succeeded."""
    job = indexed(upstream_pi(mpi, "pi"))
    job["spec"]["runPolicy"]["cleanPodPolicy"] = "None"
    log, took = run_to_success(real_cluster, namespace, job)
    launcher = real_cluster.rest.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/pi-launcher")
    print(f"\n{mpi} IndexedJob workers: apply to Succeeded in {took:.1f}s, launcher pods failed before: "
          f"{launcher['status'].get('failed', 0)}", file=sys.stderr)
    assert_pi(log, ["pi-worker-0", "pi-worker-1"])
    succeeded = conditions(get_job(real_cluster, namespace, "pi"))["Succeeded"]
    assert succeeded["reason"] == "MPIJobSucceeded", succeeded
    assert_job_workers(real_cluster, namespace, "pi", 2)


def _worker_state(cluster: LocalCluster, namespace: str, name: str) -> str:
    """The worker Job's status and its pods' phases, exit codes and conditions: what a failed wait shows."""
    job = worker_job(cluster, namespace, name) or {}
    pods = [(p["metadata"]["name"], p["metadata"].get("deletionTimestamp"), (p.get("status") or {}).get("phase"),
             [s.get("state") for s in (p.get("status") or {}).get("containerStatuses") or []])
            for p in worker_pods(cluster, namespace, name)]
    return f"worker Job status: {job.get('status')}\nworker pods: {pods}\n{diagnostics(cluster, namespace)}"


def _config_data(cluster: LocalCluster, namespace: str, name: str, discover_hosts: str) -> JSON:
    """The job's ConfigMap's data once its discover_hosts.sh is `discover_hosts`."""
    def listed() -> JSON | None:
        config = _get(cluster, f"/api/v1/namespaces/{namespace}/configmaps/{name}-config")
        data: JSON | None = (config or {}).get("data")
        return data if data and data.get("discover_hosts.sh") == discover_hosts else None

    found = wait_for(listed, 60, 0.3, what=f"{name}-config's discover_hosts.sh listing {discover_hosts!r}")
    assert found is not None
    return found


def _delete_job(cluster: LocalCluster, namespace: str, name: str) -> None:
    """Delete the MPIJob and wait until it and everything it made are gone, so that its name can be used again."""
    cluster.kubectl("delete", "mpijob", name, "-n", namespace, "--cascade=foreground", "--timeout=120s", check=True)
    children = [f"/api/v1/namespaces/{namespace}/configmaps/{name}-config",
                f"/api/v1/namespaces/{namespace}/secrets/{name}-ssh",
                f"/api/v1/namespaces/{namespace}/services/{name}",
                f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}-launcher"]
    wait_for(lambda: all(_get(cluster, path) is None for path in children) and not cluster.rest.get(
        f"/api/v1/namespaces/{namespace}/pods?labelSelector=training.kubeflow.org/job-name={name}")["items"],
        120, 0.5, what=f"{name}'s children and pods gone")


def test_hostfiles_are_the_pods_backends_byte_for_byte(real_cluster: LocalCluster, namespace: str) -> None:
    """The job held before mpirun (tests/e2e/held.py) under Pods (upstream's job as is), then, deleted, under
    IndexedJob with the same name: the ConfigMaps' data (hostfile, and discover_hosts.sh with both workers Running)
    are the same bytes; let go, the job computes pi on both workers."""
    domain = f"pi.{namespace}.svc"
    discover = f"#!/bin/sh\necho pi-worker-0.{domain}\necho pi-worker-1.{domain}\n"
    apply(real_cluster, namespace, held_pi("pi"))
    wait_held(real_cluster, namespace, "pi")
    under_pods = _config_data(real_cluster, namespace, "pi", discover)
    assert under_pods == {"hostfile": f"pi-worker-0.{domain} slots=1\npi-worker-1.{domain} slots=1\n",
                          "discover_hosts.sh": discover}
    assert worker_job(real_cluster, namespace, "pi") is None
    _delete_job(real_cluster, namespace, "pi")

    apply(real_cluster, namespace, indexed(held_pi("pi")))
    wait_held(real_cluster, namespace, "pi")
    assert _config_data(real_cluster, namespace, "pi", discover) == under_pods
    assert_job_workers(real_cluster, namespace, "pi", 2)
    let_go(real_cluster, namespace, "pi")
    outcome, final = wait_finished(real_cluster, namespace, "pi", 180)
    assert outcome == "Succeeded", f"{conditions(final)}\n{diagnostics(real_cluster, namespace)}"
    assert_pi(launcher_log(real_cluster, namespace, "pi"), ["pi-worker-0", "pi-worker-1"])


def test_a_deleted_worker_comes_back_with_its_hostname(real_cluster: LocalCluster, namespace: str) -> None:
    """While the launcher waits (held before mpirun), worker 1's pod is deleted. Its sshd exits 0 on SIGTERM, so the
    pod ends Succeeded and the Job controller counts index 1 completed; the reconciler takes it out of the worker
    Job's completedIndexes (one Warning event WorkerIndexCompleted) and the Job controller makes the worker again: a
    new name, the same hostname, its rank label, in the same worker Job, worker 0 untouched. discover_hosts.sh lists
    it again, and once let go the job computes pi on both workers."""
    domain = f"pi.{namespace}.svc"
    discover = f"#!/bin/sh\necho pi-worker-0.{domain}\necho pi-worker-1.{domain}\n"
    apply(real_cluster, namespace, indexed(held_pi("pi")))
    wait_held(real_cluster, namespace, "pi")
    listed = _config_data(real_cluster, namespace, "pi", discover)
    before = assert_job_workers(real_cluster, namespace, "pi", 2)
    deleted = before[1]["metadata"]

    first = worker_job(real_cluster, namespace, "pi")
    assert first is not None
    real_cluster.kubectl("delete", "pod", deleted["name"], "-n", namespace, "--wait=false", check=True)

    def replaced() -> JSON | None:
        pods = worker_pods(real_cluster, namespace, "pi")
        again = [p for p in pods if p["metadata"]["labels"][INDEX] == "1"]
        done = len(pods) == 2 and len(again) == 1 and again[0]["metadata"]["uid"] != deleted["uid"]
        return again[0] if done and _running(again[0]) else None

    try:
        replacement = wait_for(replaced, 90, 0.5, what="worker 1 deleted, then made again by the Job controller")
    except HarnessError as err:
        raise AssertionError(f"{err}\n{_worker_state(real_cluster, namespace, 'pi')}") from None
    assert replacement is not None
    assert replacement["metadata"]["name"] != deleted["name"]
    after = assert_job_workers(real_cluster, namespace, "pi", 2)
    assert after[0]["metadata"]["uid"] == before[0]["metadata"]["uid"], "worker 0 left as it was"
    assert after[1]["metadata"]["uid"] == replacement["metadata"]["uid"]
    job = worker_job(real_cluster, namespace, "pi")
    assert job is not None
    assert job["metadata"]["uid"] == first["metadata"]["uid"], "the same worker Job"
    assert not (job.get("status") or {}).get("completedIndexes"), job.get("status")
    events = real_cluster.rest.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    completed = [(e["type"], e["involvedObject"]["name"], e.get("count", 1)) for e in events
                 if e.get("reason") == "WorkerIndexCompleted"]
    assert completed == [("Warning", "pi", 1)], completed
    assert _config_data(real_cluster, namespace, "pi", discover) == listed
    assert is_running(real_cluster, namespace, "pi")

    let_go(real_cluster, namespace, "pi")
    outcome, final = wait_finished(real_cluster, namespace, "pi", 180)
    assert outcome == "Succeeded", f"{conditions(final)}\n{diagnostics(real_cluster, namespace)}"
    assert_pi(launcher_log(real_cluster, namespace, "pi"), ["pi-worker-0", "pi-worker-1"])


def test_netcheck_waits_for_ready_indexed_job_workers(real_cluster: LocalCluster, namespace: str) -> None:
    """examples/netcheck (Open MPI 5; WaitForWorkersReady, a tcpSocket readiness probe on sshd) with the backend
    switched: no launcher pod before both workers are Ready, then the exchange between the two workers."""
    job = indexed(netcheck_job("openmpi"))
    assert job["spec"]["launcherCreationPolicy"] == "WaitForWorkersReady"
    apply(real_cluster, namespace, job)
    early: list[str] = []

    def workers_ready() -> bool:
        pods = real_cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
        ready = [p for p in pods if p["metadata"]["labels"].get("training.kubeflow.org/job-role") == "worker"
                 and _ready(p)]
        if len(ready) < 2:
            early.extend(p["metadata"]["name"] for p in pods if "-launcher-" in p["metadata"]["name"])
        return len(ready) == 2

    wait_for(workers_ready, 120, 0.1, what="both workers Ready")
    assert early == [], f"launcher pods before the workers were Ready: {sorted(set(early))}"
    assert_job_workers(real_cluster, namespace, "netcheck", 2)
    outcome, final = wait_finished(real_cluster, namespace, "netcheck")
    assert outcome == "Succeeded", f"{conditions(final)}\n{diagnostics(real_cluster, namespace)}"
    assert_netcheck(launcher_log(real_cluster, namespace, "netcheck"), "openmpi, IndexedJob workers")


def test_failing_launcher_ends_failed_with_its_reason(real_cluster: LocalCluster, namespace: str) -> None:
    """As test_features.py's spec, plus: cleanPodPolicy Running (upstream's example) suspends the worker Job, whose
    pods the Job controller then deletes."""
    job = indexed(upstream_pi("openmpi", "fails"))
    job["spec"]["runPolicy"]["backoffLimit"] = 1
    _spec(job, "Launcher")["containers"][0]["command"] = ["sh", "-c", "exit 3"]
    _spec(job, "Launcher")["containers"][0]["args"] = None
    apply(real_cluster, namespace, job)
    outcome, final = wait_finished(real_cluster, namespace, "fails")
    assert outcome == "Failed", diagnostics(real_cluster, namespace)
    failed = conditions(final)["Failed"]
    launcher = real_cluster.rest.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/fails-launcher")
    job_failed = next(c for c in launcher["status"]["conditions"] if c["type"] == "Failed")
    assert job_failed["reason"] == "BackoffLimitExceeded", job_failed
    assert (failed["reason"], failed["message"]) in {
        ("BackoffLimitExceeded", job_failed["message"]), ("BackoffLimitExceeded/", f"{job_failed['message']}: ")}, \
        (failed, job_failed)
    wait_for(lambda: (worker_job(real_cluster, namespace, "fails") or {}).get("spec", {}).get("suspend") is True
             and not worker_pods(real_cluster, namespace, "fails"), 60, 0.5,
             what="the worker Job suspended and its pods gone")


def test_suspended_makes_no_worker_job_then_resumed_succeeds(real_cluster: LocalCluster, namespace: str) -> None:
    job = indexed(upstream_pi("openmpi", "pi"))
    job["spec"]["runPolicy"]["suspend"] = True
    apply(real_cluster, namespace, job)
    wait_for(lambda: conditions(get_job(real_cluster, namespace, "pi")).get("Suspended", {}).get("status") == "True",
             60, 0.3, what="the MPIJob Suspended")
    synced = reconciler_syncs(real_cluster, namespace, "pi")
    real_cluster.kubectl("annotate", "mpijob", "pi", "-n", namespace, "test.mpijob/nudge=1", check=True)
    wait_synced_again(real_cluster, namespace, "pi", synced)  # a later sync of the suspended job made nothing to run
    assert real_cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods")["items"] == []
    assert worker_job(real_cluster, namespace, "pi") is None
    real_cluster.kubectl("patch", "mpijob", "pi", "-n", namespace, "--type=merge",
                         "-p", '{"spec":{"runPolicy":{"suspend":false}}}', check=True)
    outcome, final = wait_finished(real_cluster, namespace, "pi")
    assert outcome == "Succeeded", f"{conditions(final)}\n{diagnostics(real_cluster, namespace)}"
    assert_pi(launcher_log(real_cluster, namespace, "pi"), ["pi-worker-0", "pi-worker-1"])
    made = worker_job(real_cluster, namespace, "pi")
    assert made is not None, "the worker Job made on resume"
    resumed = conditions(final)["Suspended"]
    assert resumed["status"] == "False", resumed
    assert made["metadata"]["creationTimestamp"] >= resumed["lastTransitionTime"], (made["metadata"], resumed)


def test_launcher_as_worker_is_rank_zero_and_the_worker_rank_one(real_cluster: LocalCluster, namespace: str) -> None:
    job = indexed(upstream_pi("openmpi", "law"))
    job["spec"]["runLauncherAsWorker"] = True
    job["spec"]["runPolicy"]["cleanPodPolicy"] = "None"  # the worker kept, to read its rank label
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 1
    log, _ = run_to_success(real_cluster, namespace, job)
    config = real_cluster.rest.get(f"/api/v1/namespaces/{namespace}/configmaps/law-config")
    domain = f"law.{namespace}.svc"
    assert config["data"]["hostfile"] == f"law-launcher.{domain} slots=1\nlaw-worker-0.{domain} slots=1\n"
    assert_pi(log, ["law-launcher", "law-worker-0"])
    assert_job_workers(real_cluster, namespace, "law", 1, offset=1)


def test_the_operators_default_backend(real_cluster: LocalCluster, namespace: str) -> None:
    """The deployed reconciler with ``--default-worker-backend=IndexedJob``: upstream's job, which says nothing, runs
    its workers as the worker Job and succeeds."""
    with reconciler_flag(real_cluster, "--default-worker-backend=IndexedJob"):
        job = upstream_pi("openmpi", "pi")
        job["spec"]["runPolicy"]["cleanPodPolicy"] = "None"
        assert BACKEND not in (job["metadata"].get("annotations") or {})
        log, _ = run_to_success(real_cluster, namespace, job)
        assert_pi(log, ["pi-worker-0", "pi-worker-1"])
        assert_job_workers(real_cluster, namespace, "pi", 2)
