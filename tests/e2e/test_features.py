"""Behaviour that only a real node shows: failures, suspension, launcher placement, host network,
jobs left to another controller. Each asserts the MPIJob's conditions and, where MPI runs, the
launcher's log."""

from __future__ import annotations

from typing import Any

import yaml

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import JSON, conditions, diagnostics, get_job, launcher_log, wait_finished
from hack.devcluster.wait import wait_for
from tests.e2e.jobs import apply, assert_pi, reconciler_syncs, run_to_success, upstream_pi, wait_synced_again


def _pods(cluster: LocalCluster, namespace: str) -> list[JSON]:
    items: list[JSON] = cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods").get("items", [])
    return items


def _spec(job: JSON, replica: str) -> Any:
    return job["spec"]["mpiReplicaSpecs"][replica]["template"]["spec"]


def test_failing_launcher_ends_failed_with_its_reason(real_cluster: LocalCluster, namespace: str) -> None:
    job = upstream_pi("openmpi", "fails")
    job["spec"]["runPolicy"]["backoffLimit"] = 1
    _spec(job, "Launcher")["containers"][0]["command"] = ["sh", "-c", "exit 3"]
    _spec(job, "Launcher")["containers"][0]["args"] = None
    apply(real_cluster, namespace, job)
    outcome, final = wait_finished(real_cluster, namespace, "fails")
    assert outcome == "Failed", diagnostics(real_cluster, namespace)
    failed = conditions(final)["Failed"]
    launcher = real_cluster.rest.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/fails-launcher")
    job_failed = next(c for c in launcher["status"]["conditions"] if c["type"] == "Failed")
    # as upstream: the launcher Job's reason and message, followed by "/" + reason and ": " + message of
    # the last failed launcher pod when one is still there (both empty here: a container that exits
    # non-zero leaves the pod's own reason and message unset; and the Job controller may have deleted
    # the pod already, as it does with restartPolicy OnFailure once the limit is reached)
    assert job_failed["reason"] == "BackoffLimitExceeded", job_failed
    assert (failed["reason"], failed["message"]) in {
        ("BackoffLimitExceeded", job_failed["message"]), ("BackoffLimitExceeded/", f"{job_failed['message']}: ")}, \
        (failed, job_failed)
    # no log to read: with restartPolicy OnFailure the Job controller deletes the launcher pod once the
    # backoff limit is reached


def test_suspended_has_no_pods_then_resumed_succeeds(real_cluster: LocalCluster, namespace: str) -> None:
    job = upstream_pi("openmpi", "pi")
    job["spec"]["runPolicy"]["suspend"] = True
    apply(real_cluster, namespace, job)
    wait_for(lambda: conditions(get_job(real_cluster, namespace, "pi")).get("Suspended", {}).get("status") == "True",
             60, 0.3, what="the MPIJob Suspended")
    synced = reconciler_syncs(real_cluster, namespace, "pi")
    real_cluster.kubectl("annotate", "mpijob", "pi", "-n", namespace, "test.mpijob/nudge=1", check=True)
    wait_synced_again(real_cluster, namespace, "pi", synced)  # a later sync of the suspended job made no pod
    assert _pods(real_cluster, namespace) == []
    real_cluster.kubectl("patch", "mpijob", "pi", "-n", namespace, "--type=merge",
                         "-p", '{"spec":{"runPolicy":{"suspend":false}}}', check=True)
    outcome, _ = wait_finished(real_cluster, namespace, "pi")
    assert outcome == "Succeeded", diagnostics(real_cluster, namespace)
    assert_pi(launcher_log(real_cluster, namespace, "pi"), ["pi-worker-0", "pi-worker-1"])


def test_launcher_as_worker_is_rank_zero(real_cluster: LocalCluster, namespace: str) -> None:
    job = upstream_pi("openmpi", "law")
    job["spec"]["runLauncherAsWorker"] = True
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 1
    log, _ = run_to_success(real_cluster, namespace, job)
    config = real_cluster.rest.get(f"/api/v1/namespaces/{namespace}/configmaps/law-config")
    assert config["data"]["hostfile"].splitlines()[0].startswith(f"law-launcher.law.{namespace}.svc")
    assert_pi(log, ["law-launcher", "law-worker-0"])


def test_wait_for_workers_ready(real_cluster: LocalCluster, namespace: str) -> None:
    job = upstream_pi("openmpi", "wfw")
    job["spec"]["launcherCreationPolicy"] = "WaitForWorkersReady"
    _spec(job, "Worker")["containers"][0]["readinessProbe"] = {"tcpSocket": {"port": 2222}, "periodSeconds": 1}
    apply(real_cluster, namespace, job)
    seen_launcher_early = False

    def workers_ready() -> bool:
        nonlocal seen_launcher_early
        pods = _pods(real_cluster, namespace)
        workers = [p for p in pods if "-worker-" in p["metadata"]["name"]]
        ready = [w for w in workers if any(c["type"] == "Ready" and c["status"] == "True"
                                           for c in (w.get("status") or {}).get("conditions") or [])]
        if len(ready) < 2 and any("-launcher-" in p["metadata"]["name"] for p in pods):
            seen_launcher_early = True
        return len(ready) == 2

    wait_for(workers_ready, 120, 0.1, what="both workers Ready")
    assert not seen_launcher_early, "the launcher pod existed before the workers were Ready"
    outcome, _ = wait_finished(real_cluster, namespace, "wfw")
    assert outcome == "Succeeded", diagnostics(real_cluster, namespace)
    assert_pi(launcher_log(real_cluster, namespace, "wfw"), ["wfw-worker-0", "wfw-worker-1"])


def test_host_network(real_cluster: LocalCluster, namespace: str) -> None:
    """Launcher and one worker in the host's network namespace (sshd on 2222 of the host)."""
    job = upstream_pi("openmpi", "hn")
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 1
    for replica in ("Launcher", "Worker"):
        _spec(job, replica)["hostNetwork"] = True
        _spec(job, replica)["dnsPolicy"] = "ClusterFirstWithHostNet"
    _spec(job, "Launcher")["containers"][0]["args"] = ["-n", "1", "/home/mpiuser/pi"]
    log, _ = run_to_success(real_cluster, namespace, job)
    assert "pi is approximately 3.1" in log, log


def test_job_managed_by_multikueue_is_left_alone(real_cluster: LocalCluster, namespace: str) -> None:
    job = upstream_pi("openmpi", "mk")
    job["spec"]["runPolicy"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    apply(real_cluster, namespace, job)
    wait_synced_again(real_cluster, namespace, "mk", 0)  # the reconciler saw it (and left it alone)
    assert _pods(real_cluster, namespace) == []
    final = get_job(real_cluster, namespace, "mk")
    assert not (final.get("status") or {}).get("conditions"), yaml.safe_dump(final.get("status"))
    secrets = real_cluster.rest.get(f"/api/v1/namespaces/{namespace}/secrets").get("items", [])
    assert not [s for s in secrets if s["metadata"]["name"].startswith("mk-")]
