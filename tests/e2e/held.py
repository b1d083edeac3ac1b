"""An MPI job held mid-run for as long as a test needs: upstream's pi example whose launcher waits for a file
before `mpirun`, so that the operator can be upgraded, removed and installed again while the job runs, however
long that takes; the test then lets it go (`kubectl exec` creates the file) and the job computes pi.

    apply(cluster, namespace, held_pi("pi"))
    before = wait_held(cluster, namespace, "pi")      # pod name -> UID, launcher waiting, workers Running
    ...                                                # upgrade, uninstall, reinstall the operator
    assert job_pods(cluster, namespace, "pi") == before
    let_go(cluster, namespace, "pi")
"""

from __future__ import annotations

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import JSON, conditions, diagnostics, get_job, launcher_log, wait_finished
from hack.devcluster.wait import wait_for
from tests.e2e.jobs import assert_pi, reconciler_syncs, upstream_pi

GO_FILE = "/tmp/mpijob-go"  # in the launcher container
WAITING = "held: waiting"
# trap: sh as the container's PID 1 would ignore SIGTERM, and a deleted launcher would take its 30 s grace period
HOLD = f'trap "exit 143" TERM; echo "{WAITING}"; until [ -e {GO_FILE} ]; do sleep 0.5; done; exec mpirun "$@"'


def held_pi(name: str) -> JSON:
    """Upstream's Open MPI pi example, named NAME, whose launcher waits for GO_FILE before running mpirun."""
    job = upstream_pi("openmpi", name)
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["command"] == ["mpirun"], launcher
    launcher["command"], launcher["args"] = ["sh", "-c", HOLD, "sh", *launcher["args"]], None
    return job


def job_pods(cluster: LocalCluster, namespace: str, name: str) -> dict[str, str]:
    """Pod name -> UID of every pod of the job (launcher and workers), those being deleted included."""
    pods = cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=training.kubeflow.org/job-name={name}")
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods["items"]}


def running_pods(cluster: LocalCluster, namespace: str, name: str) -> dict[str, str] | None:
    """Pod name -> UID of the job's pods when there are exactly its launcher and two workers, all Running and
    none being deleted; else None."""
    pods = cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=training.kubeflow.org/job-name={name}")
    running = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods["items"]
               if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}
    return running if len(running) == len(pods["items"]) == 3 else None


def wait_held(cluster: LocalCluster, namespace: str, name: str, timeout: float = 180) -> dict[str, str]:
    """Until the job's three pods run and its launcher waits; returns pod name -> UID."""
    def held() -> dict[str, str] | None:
        pods = running_pods(cluster, namespace, name)
        return pods if pods and WAITING in launcher_log(cluster, namespace, name) else None

    found = wait_for(held, timeout, 0.5, what=f"{namespace}/{name}'s pods Running and its launcher waiting")
    assert found is not None
    return found


def is_running(cluster: LocalCluster, namespace: str, name: str) -> bool:
    """The MPIJob's Running condition is True and it has not finished."""
    conds = conditions(get_job(cluster, namespace, name))
    return (conds.get("Running", {}).get("status") == "True"
            and not any(conds.get(t, {}).get("status") == "True" for t in ("Succeeded", "Failed")))


def launcher_job_uid(cluster: LocalCluster, namespace: str, name: str) -> str:
    return str(cluster.rest.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}-launcher")["metadata"]["uid"])


def let_go(cluster: LocalCluster, namespace: str, name: str) -> None:
    """Let the launcher run mpirun."""
    cluster.kubectl("exec", "-n", namespace, f"job/{name}-launcher", "--", "touch", GO_FILE, check=True)


def assert_adopted(cluster: LocalCluster, namespace: str, name: str, before: dict[str, str], launcher: str) -> None:
    """After the operator was replaced: its reconciler syncs the held job and keeps it as it was (the same pods and
    launcher Job, still Running)."""
    wait_for(lambda: reconciler_syncs(cluster, namespace, name) > 0, 60, 0.5,
             what="the new reconciler syncing the running job")
    assert running_pods(cluster, namespace, name) == before
    assert launcher_job_uid(cluster, namespace, name) == launcher
    assert is_running(cluster, namespace, name)


def assert_completes(cluster: LocalCluster, namespace: str, name: str, before: dict[str, str]) -> JSON:
    """Let the held job go: it succeeds, computes pi on its two workers, and no pod was made twice. The finished
    MPIJob."""
    let_go(cluster, namespace, name)
    outcome, final = wait_finished(cluster, namespace, name, timeout=180)
    assert outcome == "Succeeded", f"{conditions(final)}\n{diagnostics(cluster, namespace)}"
    assert_pi(launcher_log(cluster, namespace, name), [f"{name}-worker-0", f"{name}-worker-1"])
    assert set(job_pods(cluster, namespace, name).items()) <= set(before.items()), "no pod made twice"
    return final
