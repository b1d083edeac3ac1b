"""Launcher gating on the real node (docs/proposals/launcher-gating.md): a WaitForWorkersReady job created suspended
(as Kueue creates every job) and then resumed, whose workers start sshd 15 s late behind a tcpSocket readiness
probe. Upstream releases the launcher in the sync that resumes the job, so ``mpirun`` meets workers that do not
resolve or refuse ssh, and the launcher restarts; here it starts once every worker is Ready and never restarts."""

from __future__ import annotations

import shlex

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import JSON, conditions, diagnostics, get_job, launcher_log, wait_finished
from hack.devcluster.wait import wait_for
from tests.e2e.jobs import apply, assert_pi, upstream_pi

SSHD_DELAY_SECONDS = 15
SSHD_PORT = 2222  # the non-root sshd of upstream's example (its .sshd_config)


def late_sshd_pi(name: str) -> JSON:
    """Upstream's Open MPI pi, created suspended, waiting for its workers, whose sshd starts late."""
    job = upstream_pi("openmpi", name)
    job["spec"]["launcherCreationPolicy"] = "WaitForWorkersReady"
    job["spec"]["runPolicy"]["suspend"] = True
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    sshd = shlex.join([*worker["command"], *(worker.get("args") or [])])
    worker["command"] = ["sh", "-c", f"sleep {SSHD_DELAY_SECONDS} && exec {sshd}"]
    worker["args"] = None
    worker["readinessProbe"] = {"tcpSocket": {"port": SSHD_PORT}, "periodSeconds": 1}
    return job


def _pods(cluster: LocalCluster, namespace: str) -> list[JSON]:
    items: list[JSON] = cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods").get("items", [])
    return items


def _ready(pod: JSON) -> bool:
    found = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in found)


def test_a_resumed_job_starts_its_launcher_once_late_workers_are_ready(real_cluster: LocalCluster,
                                                                        namespace: str) -> None:
    apply(real_cluster, namespace, late_sshd_pi("late"))
    wait_for(lambda: conditions(get_job(real_cluster, namespace, "late")).get("Suspended", {}).get("status") == "True",
             60, 0.3, what="the MPIJob Suspended")
    real_cluster.kubectl("patch", "mpijob", "late", "-n", namespace, "--type=merge",
                         "-p", '{"spec":{"runPolicy":{"suspend":false}}}', check=True)
    early: list[str] = []

    def workers_ready() -> bool:
        pods = _pods(real_cluster, namespace)
        ready = [p for p in pods if "-worker-" in p["metadata"]["name"] and _ready(p)]
        if len(ready) < 2:
            early.extend(p["metadata"]["name"] for p in pods if "-launcher-" in p["metadata"]["name"])
        return len(ready) == 2

    wait_for(workers_ready, 180, 0.1, what="both workers Ready")
    assert early == [], f"launcher pods before the workers were Ready: {sorted(set(early))}"
    outcome, _ = wait_finished(real_cluster, namespace, "late", 240)
    assert outcome == "Succeeded", diagnostics(real_cluster, namespace)
    launchers = [p for p in _pods(real_cluster, namespace) if "-launcher-" in p["metadata"]["name"]]
    restarts = [(p["metadata"]["name"], [s.get("restartCount") for s in p["status"].get("containerStatuses") or []])
                for p in launchers]
    assert [r for _, r in restarts] == [[0]], f"one launcher pod, never restarted: {restarts}"
    launcher = real_cluster.rest.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/late-launcher")
    assert launcher["status"].get("failed", 0) == 0, launcher["status"]
    assert_pi(launcher_log(real_cluster, namespace, "late"), ["late-worker-0", "late-worker-1"])
