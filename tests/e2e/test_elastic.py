"""Long-running jobs on the real node: Elastic Horovod's host discovery seen from inside the launcher,
and a worker pod deleted in the middle of a run."""

from __future__ import annotations

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import JSON, conditions, diagnostics, wait_finished
from hack.devcluster.wait import wait_for
from tests.e2e.jobs import apply, upstream_pi

CHILD_KINDS = ("pods", "services", "secrets", "configmaps")


def _running_workers(cluster: LocalCluster, namespace: str, job: str) -> list[str]:
    pods: list[JSON] = cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods").get("items", [])
    return sorted(p["metadata"]["name"] for p in pods if p["metadata"]["name"].startswith(f"{job}-worker-")
                  and (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))


def _discovered(cluster: LocalCluster, namespace: str, job: str) -> list[str]:
    out = cluster.kubectl("exec", "-n", namespace, f"job/{job}-launcher", "--", "sh", "/etc/mpi/discover_hosts.sh")
    return sorted(line.split(".")[0] for line in out.stdout.split())


def _sleeping_launcher(name: str, workers: int) -> JSON:
    job = upstream_pi("openmpi", name)
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = workers
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    launcher["resources"]["limits"]["cpu"] = "100m"
    for spec in job["spec"]["mpiReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "100m"
    launcher["command"], launcher["args"] = ["sleep", "600"], None
    return job


def test_discover_hosts_lists_the_running_workers(real_cluster: LocalCluster, namespace: str) -> None:
    apply(real_cluster, namespace, _sleeping_launcher("el", 2))
    wait_for(lambda: len(_running_workers(real_cluster, namespace, "el")) == 2, 120, 0.3, what="2 workers Running")
    wait_for(lambda: _discovered(real_cluster, namespace, "el") == ["el-worker-0", "el-worker-1"], 90, 1,
             what="discover_hosts.sh in the launcher listing both workers")
    real_cluster.kubectl("patch", "mpijob", "el", "-n", namespace, "--type=merge",
                         "-p", '{"spec":{"mpiReplicaSpecs":{"Worker":{"replicas":3}}}}', check=True)
    wait_for(lambda: len(_running_workers(real_cluster, namespace, "el")) == 3, 120, 0.3, what="3 workers Running")
    wait_for(lambda: _discovered(real_cluster, namespace, "el") == _running_workers(real_cluster, namespace, "el"),
             90, 1, what="discover_hosts.sh listing the third worker too")


def test_worker_deleted_mid_run_fails_the_job_and_delete_leaves_nothing(real_cluster: LocalCluster,
                                                                        namespace: str) -> None:
    # Open MPI 4, whose mpirun exits 205 when it loses a daemon; Open MPI 5.0.7's mpirun was seen to print
    # "PRTE has lost communication with a remote daemon" and exit 0, which makes the job Succeeded
    # (docs/user-guide.md, "The launcher fails")
    job = upstream_pi("openmpi4", "wd")
    job["spec"]["runPolicy"]["backoffLimit"] = 0
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    launcher["args"] = ["-n", "2", "sh", "-c", "echo started on $(hostname); sleep 600"]
    apply(real_cluster, namespace, job)

    def ranks_started() -> bool:
        log = real_cluster.kubectl("logs", "-n", namespace, "job/wd-launcher").stdout
        return log.count("started on") == 2

    wait_for(ranks_started, 120, 0.5, what="both ranks running")
    real_cluster.kubectl("delete", "pod", "-n", namespace, "wd-worker-1", "--wait=false", check=True)
    outcome, final = wait_finished(real_cluster, namespace, "wd", timeout=120)
    assert outcome == "Failed", diagnostics(real_cluster, namespace)
    failed = conditions(final)["Failed"]
    assert failed["reason"].startswith("BackoffLimitExceeded"), failed
    real_cluster.kubectl("delete", "mpijob", "-n", namespace, "wd", "--wait=true", check=True, timeout=90)

    def nothing_left() -> bool:
        for kind in CHILD_KINDS:
            items = real_cluster.rest.get(f"/api/v1/namespaces/{namespace}/{kind}").get("items", [])
            if [i for i in items if i["metadata"]["name"].startswith("wd-")]:
                return False
        jobs = real_cluster.rest.get(f"/apis/batch/v1/namespaces/{namespace}/jobs").get("items", [])
        return not jobs

    wait_for(nothing_left, 90, 0.5, what="every child of the deleted MPIJob gone (garbage collector)")
