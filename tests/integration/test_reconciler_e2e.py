"""MPIJobs run to completion on the real control plane with our reconciler (controller.md 6.3, 6.4).

The real Job controller runs the launcher Job; kwok makes pods Running, Ready, Succeeded or Failed
(hack/devcluster/kwok-stages). Every wait has a deadline; absence is checked after a later event proves the
reconciler has moved on.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.wait import wait_for
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl

HANG = {"test.mpijob/outcome": "hang"}
LAUNCHER_ENV = {
    "OpenMPI": [
        {"name": "K_MPI_JOB_ROLE", "value": "launcher"},
        {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
        {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
        {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
        {"name": "OMPI_MCA_orte_set_default_slots", "value": "1"},
        {"name": "PRTE_MCA_prte_keep_fqdn_hostnames", "value": "false"},
        {"name": "PRTE_MCA_prte_default_hostfile", "value": "/etc/mpi/hostfile"},
        {"name": "PRTE_MCA_plm_ssh_args", "value": "-o ConnectionAttempts\t10"},
        {"name": "PRTE_MCA_prte_set_default_slots", "value": "1"},
        {"name": "NVIDIA_VISIBLE_DEVICES"}, {"name": "NVIDIA_DRIVER_CAPABILITIES"}],
    "Intel": [
        {"name": "K_MPI_JOB_ROLE", "value": "launcher"},
        {"name": "I_MPI_HYDRA_HOST_FILE", "value": "/etc/mpi/hostfile"},
        {"name": "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "value": "-o ConnectionAttempts=10"},
        {"name": "I_MPI_PERHOST", "value": "1"},
        {"name": "NVIDIA_VISIBLE_DEVICES"}, {"name": "NVIDIA_DRIVER_CAPABILITIES"}],
    "MPICH": [
        {"name": "K_MPI_JOB_ROLE", "value": "launcher"},
        {"name": "HYDRA_HOST_FILE", "value": "/etc/mpi/hostfile"},
        {"name": "HYDRA_LAUNCH_EXTRA_ARGS", "value": "-o ConnectionAttempts=10"},
        {"name": "HYDRA_LAUNCHER_EXTRA_ARGS", "value": "-o ConnectionAttempts=10"},
        {"name": "NVIDIA_VISIBLE_DEVICES"}, {"name": "NVIDIA_DRIVER_CAPABILITIES"}],
}


def job_event(jobs: Jobs, job: str, kind: str, reason: str, message: str) -> dict[str, Any]:
    """The fields of an event on the MPIJob ``job`` that upstream's integration tests match (its ``eventForJob``):
    type, reason, source and reporting component, and the whole object reference (less its resourceVersion,
    which is whichever version the reconciler had read); the message too, which is upstream's byte for byte."""
    stored = jobs.get(job)["metadata"]
    return {"type": kind, "reason": reason, "message": message, "source": {"component": "mpi-job-controller"},
            "reportingComponent": "mpi-job-controller", "namespace": jobs.ns, "involvedObject": {
                "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "namespace": jobs.ns, "name": job,
                "uid": stored["uid"]}}


def event_fields(event: dict[str, Any]) -> dict[str, Any]:
    """The fields ``job_event`` names, from an Event the API server holds."""
    reference = dict(event["involvedObject"])
    assert reference.pop("resourceVersion", "").isdigit(), event["involvedObject"]
    return {"type": event["type"], "reason": event["reason"], "message": event["message"],
            "source": event["source"], "reportingComponent": event["reportingComponent"],
            "namespace": event["metadata"]["namespace"], "involvedObject": reference}


def hostfile(job: str, ns: str, workers: int, implementation: str, launcher: bool = False) -> str:
    hosts = ([f"{job}-launcher"] if launcher else []) + [f"{job}-worker-{i}" for i in range(workers)]
    sep = " slots=" if implementation == "OpenMPI" else ":"
    return "".join(f"{h}.{job}.{ns}.svc{sep}1\n" for h in hosts)


@pytest.fixture
def jobs(cluster: LocalCluster, namespace: str, reconciler: ReconcilerControl) -> Jobs:
    return Jobs(cluster, namespace)


@pytest.mark.parametrize("implementation", ["OpenMPI", "Intel", "MPICH"])
def test_mpijob_succeeds(jobs: Jobs, implementation: str) -> None:
    # the launcher runs 3 s, so that its Running phase is seen however busy the machine is
    jobs.create(mpijob("pi", 2, launcher_annotations={"test.mpijob/run-for": "3s"}, mpiImplementation=implementation))
    jobs.wait_condition("pi", "Created")
    config = jobs.object("configmaps", "pi-config")
    assert config is not None
    assert config["data"]["hostfile"] == hostfile("pi", jobs.ns, 2, implementation)
    launcher = jobs.wait_launcher("pi")
    container = launcher["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == LAUNCHER_ENV[implementation]
    assert launcher["spec"]["podReplacementPolicy"] == "Failed"
    secret = jobs.object("secrets", "pi-ssh")
    assert secret is not None
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert base64.b64decode(secret["data"]["ssh-privatekey"]).startswith(b"-----BEGIN EC PRIVATE KEY-----")
    assert base64.b64decode(secret["data"]["ssh-publickey"]).startswith(b"ecdsa-sha2-nistp521 ")
    service = jobs.object("services", "pi")
    assert service is not None
    assert service["spec"]["clusterIP"] == "None"
    jobs.wait_condition("pi", "Succeeded", timeout=90)
    job = jobs.get("pi")
    assert job["status"]["replicaStatuses"] == {"Launcher": {"succeeded": 1}, "Worker": {}}
    assert job["status"]["completionTime"] >= job["status"]["startTime"]
    assert [c["type"] for c in job["status"]["conditions"]] == ["WorkersReady", "Created", "Running", "Succeeded"]
    assert jobs.wait_condition("pi", "Running", "False")["status"] == "False"
    workers_ready = job["status"]["conditions"][0]
    assert {key: value for key, value in workers_ready.items() if not key.endswith("Time")} == {
        "type": "WorkersReady", "status": "False", "reason": "MPIJobFinished",
        "message": "MPIJob finished: workers are released"}
    jobs.wait_workers("pi", 0)  # cleanPodPolicy Running
    assert [event_fields(e) for e in jobs.events("pi")] == [  # upstream's, no more
        job_event(jobs, "pi", "Normal", "MPIJobCreated", f"MPIJob {jobs.ns}/pi is created."),
        job_event(jobs, "pi", "Normal", "MPIJobRunning", f"MPIJob {jobs.ns}/pi is running"),
        job_event(jobs, "pi", "Normal", "MPIJobSucceeded", f"MPIJob {jobs.ns}/pi successfully completed.")]


def test_launcher_failure_fails_the_job_with_the_pod_reason(jobs: Jobs) -> None:
    failing = {"test.mpijob/outcome": "fail"}
    annotations = {"test.mpijob/pod-reason": "OOMKilled", "test.mpijob/pod-message": "out of memory",
                   "test.mpijob/exit-code": "137"}
    jobs.create(mpijob("pi", 1, launcher_labels=failing, launcher_annotations=annotations,
                       runPolicy={"cleanPodPolicy": "All", "backoffLimit": 0}))
    failed = jobs.wait_condition("pi", "Failed", timeout=90)
    assert failed["reason"] == "BackoffLimitExceeded/OOMKilled"
    assert failed["message"] == "Job has reached the specified backoff limit: out of memory"
    status = jobs.get("pi")["status"]
    assert status["replicaStatuses"]["Launcher"] == {"failed": 1}
    assert status["completionTime"]
    jobs.wait_workers("pi", 0)
    assert event_fields(jobs.events("pi")[-1]) == job_event(jobs, "pi", "Warning", "BackoffLimitExceeded/OOMKilled",
                                                            failed["message"])


def test_wait_for_workers_ready(jobs: Jobs, cluster: LocalCluster) -> None:
    nodes = [n["metadata"]["name"] for n in cluster.rest.get("/api/v1/nodes")["items"]]
    for node in nodes:
        cluster.kubectl("cordon", node, check=True)
    try:
        jobs.create(mpijob("pi", 2, launcherCreationPolicy="WaitForWorkersReady"))
        jobs.wait_workers("pi", 2, "Pending")
        wait_for(lambda: (jobs.get("pi").get("status") or {}).get("replicaStatuses") == {"Worker": {}},
                 timeout=30, what="a status without a Launcher entry")
        assert jobs.launcher("pi") is None
    finally:
        for node in nodes:
            cluster.kubectl("uncordon", node, check=True)

    def ready_times() -> list[str] | None:
        """Both workers' Ready times, read while they exist (once the launcher has run, kwok ends it and the
        workers are deleted: cleanPodPolicy Running)."""
        times = [next((c["lastTransitionTime"] for c in (p.get("status") or {}).get("conditions") or []
                       if c["type"] == "Ready" and c["status"] == "True"), "") for p in jobs.workers("pi")]
        return times if len(times) == 2 and all(times) else None

    ready = until(ready_times, timeout=60, what="both workers Ready")
    launcher = jobs.wait_launcher("pi")
    assert launcher["metadata"]["creationTimestamp"] >= max(ready)
    jobs.wait_condition("pi", "Succeeded", timeout=90)


def test_suspend_resume_with_edited_scheduling_directives(jobs: Jobs) -> None:
    jobs.create(mpijob("pi", 2, launcher_labels=HANG, runPolicy={"cleanPodPolicy": "Running", "suspend": True}))
    jobs.wait_condition("pi", "Suspended")
    jobs.wait_launcher("pi", suspended=True)
    assert jobs.pods() == [], "a job created suspended creates no pods at all"
    assert "startTime" not in jobs.get("pi")["status"]
    template = {"metadata": {"labels": {**HANG, "foo": "bar"}, "annotations": {"kueue.x-k8s.io/workload": "w1"}},
                "spec": {"nodeSelector": {"kubernetes.io/os": "linux"},
                         "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}}
    jobs.patch("pi", {"spec": {"runPolicy": {"suspend": False}, "mpiReplicaSpecs": {"Launcher": {
        "template": template}}}})
    jobs.wait_condition("pi", "Suspended", "False")
    jobs.wait_workers("pi", 2, "Running")
    launcher = jobs.wait_launcher("pi", suspended=False)
    pod_template = launcher["spec"]["template"]
    assert pod_template["metadata"]["labels"]["foo"] == "bar"
    assert pod_template["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == "w1"
    assert pod_template["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod_template["spec"]["tolerations"][-1]["key"] == "gpu"
    jobs.wait_condition("pi", "Running")
    assert jobs.get("pi")["status"]["startTime"]
    jobs.patch("pi", {"spec": {"runPolicy": {"suspend": True}}})
    jobs.wait_condition("pi", "Suspended")
    jobs.wait_workers("pi", 0)
    assert jobs.must("jobs", "pi-launcher", "batch/v1")["spec"]["suspend"] is True
    assert jobs.wait_condition("pi", "Running", "False")["reason"] == "MPIJobSuspended"
    jobs.patch("pi", {"spec": {"runPolicy": {"suspend": False}, "mpiReplicaSpecs": {"Launcher": {"template": {
        "metadata": {"labels": {"test.mpijob/outcome": "succeed", "foo": "baz"}}}}}}})
    jobs.wait_condition("pi", "Succeeded", timeout=90)
    labels = jobs.must("jobs", "pi-launcher", "batch/v1")["spec"]["template"]["metadata"]["labels"]
    assert labels["foo"] == "baz"


def test_launcher_as_worker_with_zero_workers(jobs: Jobs) -> None:
    jobs.create(mpijob("solo", 0, runLauncherAsWorker=True))
    jobs.wait_condition("solo", "Succeeded", timeout=90)
    config = jobs.object("configmaps", "solo-config")
    assert config is not None
    assert config["data"]["hostfile"] == hostfile("solo", jobs.ns, 0, "OpenMPI", launcher=True)
    assert jobs.must("services", "solo")["spec"]["publishNotReadyAddresses"] is True
    assert jobs.get("solo")["status"]["replicaStatuses"] == {"Launcher": {"succeeded": 1}, "Worker": {}}


@pytest.mark.parametrize(("policy", "remaining"), [("All", 0), ("None", 2)])
def test_clean_pod_policy(jobs: Jobs, policy: str, remaining: int) -> None:
    jobs.create(mpijob("pi", 2, runPolicy={"cleanPodPolicy": policy}))
    jobs.wait_condition("pi", "Succeeded", timeout=90)
    if remaining:
        assert len(jobs.wait_workers("pi", remaining, "Running")) == remaining
    else:
        jobs.wait_workers("pi", 0)


def test_scale_workers_up_and_down(jobs: Jobs) -> None:
    jobs.create(mpijob("pi", 2, launcher_labels=HANG))
    jobs.wait_condition("pi", "Running")
    jobs.patch("pi", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 4}}}})
    jobs.wait_workers("pi", 4, "Running")
    wait_for(lambda: jobs.must("configmaps", "pi-config")["data"]["hostfile"]
             == hostfile("pi", jobs.ns, 4, "OpenMPI"), timeout=30, what="hostfile with 4 workers")
    wait_for(lambda: jobs.must("configmaps", "pi-config")["data"]["discover_hosts.sh"].count("echo") == 4,
             timeout=30, what="discover_hosts.sh with 4 running workers")
    jobs.patch("pi", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 1}}}})
    workers = jobs.wait_workers("pi", 1)
    assert workers[0]["metadata"]["name"] == "pi-worker-0"
    wait_for(lambda: jobs.must("configmaps", "pi-config")["data"]
             == {"hostfile": hostfile("pi", jobs.ns, 1, "OpenMPI"),
                 "discover_hosts.sh": f"#!/bin/sh\necho pi-worker-0.pi.{jobs.ns}.svc\n"},
             timeout=30, what="ConfigMap with 1 worker")


def test_foreign_config_map_is_reported_and_nothing_runs(jobs: Jobs, cluster: LocalCluster) -> None:
    cluster.rest.create(jobs.path("configmaps"), {"apiVersion": "v1", "kind": "ConfigMap",
                                                  "metadata": {"name": "pi-config"}, "data": {"mine": "yes"}})
    jobs.create(mpijob("pi", 2))
    event = until(lambda: next((e for e in jobs.events("pi") if e["reason"] == "ErrResourceExists"), None),
                  timeout=30, what="ErrResourceExists event")
    assert event["type"] == "Warning"
    assert event["message"] == 'Resource "pi-config" of Kind "ConfigMap" already exists and is not managed by MPIJob'
    assert jobs.workers("pi") == []
    assert jobs.launcher("pi") is None
    assert jobs.must("configmaps", "pi-config")["data"] == {"mine": "yes"}


def sync_lines(reconciler: ReconcilerControl, key: str) -> list[str]:
    """The reconciler's canonical sync lines for ``key`` (``msg=sync key=<key> outcome=... duration_ms=...``)."""
    return [line for line in reconciler.process.log.read_text(errors="replace").splitlines()
            if f" msg=sync key={key} " in line]


def test_mpijob_managed_externally_is_left_alone(jobs: Jobs, reconciler: ReconcilerControl) -> None:
    manager = "kueue.x-k8s.io/multikueue"
    jobs.create(mpijob("external", 2, runPolicy={"managedBy": manager}))
    key = f"{jobs.ns}/external"
    # absence, proven by the job's own sync: the reconciler has seen it and decided to leave it alone
    lines = until(lambda: sync_lines(reconciler, key) or None, timeout=30, what=f"a sync of {key}")
    assert all(f' msg=sync key={key} outcome="managed by {manager}" ' in line for line in lines), lines
    external = jobs.get("external")
    assert "status" not in external or not external["status"]
    assert jobs.launcher("external") is None
    assert jobs.object("services", "external") is None
    assert jobs.object("secrets", "external-ssh") is None
    assert jobs.workers("external") == []


def test_deleting_the_mpijob_removes_every_child(jobs: Jobs) -> None:
    jobs.create(mpijob("pi", 2, launcher_labels=HANG))
    jobs.wait_condition("pi", "Running")
    jobs.delete("pi")
    for plural, name, group in (("services", "pi", ""), ("configmaps", "pi-config", ""), ("secrets", "pi-ssh", ""),
                                ("jobs", "pi-launcher", "batch/v1")):
        jobs.wait_gone(plural, name, group)
    wait_for(lambda: jobs.pods() == [], timeout=60, what="every pod of the job deleted")


def _owned_counts(jobs: Jobs, name: str) -> dict[str, Any]:
    pods = [p for p in jobs.pods(f"training.kubeflow.org/job-name={name}") if p["metadata"].get("ownerReferences")]
    names = [p["metadata"]["name"] for p in pods]
    return {"pods": len(pods), "distinct": len(set(names))}


def test_reconciler_killed_mid_creation_resumes_without_duplicates(jobs: Jobs, reconciler: ReconcilerControl,
                                                                   cluster: LocalCluster) -> None:
    reconciler.restart("--kube-api-qps=15", "--kube-api-burst=5")
    jobs.create(mpijob("big", 64, launcher_labels=HANG))
    until(lambda: 5 <= len(jobs.workers("big")) < 64 or None, timeout=60, interval=0.05,
          what="the reconciler part-way through creating 64 workers")
    reconciler.restart(crash=True)
    jobs.wait_workers("big", 64, "Running", timeout=120)
    jobs.wait_condition("big", "Running", timeout=60)
    assert _owned_counts(jobs, "big") == {"pods": 65, "distinct": 65}  # 64 workers + 1 launcher pod
    launchers = cluster.rest.get(jobs.path("jobs", group="batch/v1"))["items"]
    assert [j["metadata"]["name"] for j in launchers] == ["big-launcher"]
    assert jobs.get("big")["status"]["replicaStatuses"]["Worker"] == {"active": 64}
    # let the launcher finish: the job completes and its workers are cleaned up, nothing left behind
    launcher_pod = jobs.pods("training.kubeflow.org/job-name=big,training.kubeflow.org/job-role=launcher")[0]
    cluster.rest.merge_patch(jobs.path("pods", launcher_pod["metadata"]["name"]),
                             {"metadata": {"labels": {"test.mpijob/outcome": "succeed"}}})
    jobs.wait_condition("big", "Succeeded", timeout=90)
    jobs.wait_workers("big", 0)
    for plural in ("services", "configmaps", "secrets"):
        names = sorted(o["metadata"]["name"] for o in cluster.rest.get(jobs.path(plural))["items"]
                       if (o["metadata"].get("ownerReferences") or [{}])[0].get("name") == "big")
        assert len(names) == 1, (plural, names)
    assert [e["reason"] for e in jobs.events("big")].count("MPIJobCreated") == 1


def _finished_syncs(reconciler: ReconcilerControl, key: str) -> int:
    """How many syncs of ``key`` the reconciler logged with the outcome "finished"."""
    return sum(f"key={key} " in line and "outcome=finished" in line
               for line in reconciler.process.log.read_text(errors="replace").splitlines())


@pytest.mark.parametrize(("policy", "kept"), [("Running", 1), ("None", 2)])
def test_an_eviction_stops_the_launcher_and_nothing_is_recreated(jobs: Jobs, reconciler: ReconcilerControl,
                                                                 policy: str, kept: int) -> None:
    """A worker evicted: the job is Failed (MPIJobEvicted), its launcher Job is suspended so that mpirun stops
    (its pod is deleted), the workers are released per cleanPodPolicy, and later syncs create nothing."""
    job = mpijob("pi", 2, launcher_labels=HANG, runPolicy={"cleanPodPolicy": policy})
    jobs.create(job)
    jobs.wait_condition("pi", "Running")
    worker = jobs.must("pods", "pi-worker-1")  # evicted: the kubelet fails the pod with reason Evicted
    jobs.cluster.rest.request("PATCH", jobs.path("pods", "pi-worker-1") + "/status", {"status": {
        "phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}},
        content_type="application/merge-patch+json")
    failed = jobs.wait_condition("pi", "Failed")
    assert (failed["reason"], failed["message"]) == ("MPIJobEvicted", "1/2 workers are evicted")
    launcher = jobs.wait_launcher("pi", suspended=True, timeout=30)
    wait_for(lambda: jobs.pods("training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role=launcher") == [],
             timeout=60, what="the launcher's pod deleted by the Job controller")
    workers = jobs.wait_workers("pi", kept)  # Running: the running worker released, the evicted one kept
    assert "pi-worker-1" in [p["metadata"]["name"] for p in workers]

    def launcher_released() -> dict[str, Any] | None:
        status: dict[str, Any] = jobs.get("pi")["status"]
        return status if status["replicaStatuses"]["Launcher"] == {} else None

    status = until(launcher_released, timeout=30, what="the launcher's entry without its deleted pod")
    assert status["completionTime"] >= status["startTime"]
    # Later syncs (an edit of the job's metadata brings one) change nothing and create nothing.
    before = _finished_syncs(reconciler, f"{jobs.ns}/pi")
    jobs.patch("pi", {"metadata": {"annotations": {"test.mpijob/touch": "1"}}})
    wait_for(lambda: _finished_syncs(reconciler, f"{jobs.ns}/pi") > before, timeout=30,
             what="a sync of the finished job")
    assert jobs.get("pi")["status"] == status
    assert jobs.must("jobs", "pi-launcher", "batch/v1")["metadata"]["uid"] == launcher["metadata"]["uid"]
    assert jobs.must("jobs", "pi-launcher", "batch/v1")["spec"]["suspend"] is True
    assert [p["metadata"]["uid"] for p in jobs.workers("pi")] == [p["metadata"]["uid"] for p in workers]
    assert worker["metadata"]["uid"] in [p["metadata"]["uid"] for p in workers]
    reasons = [e["reason"] for e in jobs.events("pi")]
    assert reasons == ["MPIJobCreated", "MPIJobRunning", "MPIJobEvicted"], reasons
