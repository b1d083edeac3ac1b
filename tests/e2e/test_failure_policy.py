"""A kubeflow.org/v2 failurePolicy on the real node: a worker evicted mid-run restarts the job, whose next attempt
prints pi and succeeds (docs/proposals/v2.md, "What a restart does, step by step").

The worker is evicted through the Eviction API (what `kubectl drain` does), which gives the pod the condition
`DisruptionTarget=True` before deleting it; `kubectl delete pod` would add none, and the job's rule matches on
that condition (a plain delete is matched by exit codes only, a case the proposal documents).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from hack.devcluster import LocalCluster, api_v2
from hack.devcluster.mpijobs import CPU_LIMIT, JSON, conditions, diagnostics, launcher_log, wait_finished
from hack.devcluster.operator_deploy import enable_api_v2
from hack.devcluster.wait import wait_for
from shared.api.v2types import with_failure_policy_defaults
from tests.e2e.jobs import apply, assert_pi, run_to_success, upstream_pi

ATTEMPT = "mpijobs.kubeflow.org/restart-attempt"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pi-v2-failure-policy.yaml"
# The first attempt's launcher waits instead of running mpirun, so that the eviction comes mid-run; the next
# attempt (label 1, read through the downward API) runs upstream's mpirun as it is.
WAIT_ON_FIRST_ATTEMPT = ('if [ "$RESTART_ATTEMPT" = 0 ]; then echo "attempt 0: waiting"; exec sleep 600; fi; '
                         'exec mpirun "$@"')


@pytest.fixture(scope="module", autouse=True)
def v2_on(real_cluster: LocalCluster) -> Iterator[None]:
    """kubeflow.org/v2, opt-in, turned on for the module as the operator guide says, and off again after it."""
    enable_api_v2(real_cluster)
    try:
        yield
    finally:
        api_v2.disable(real_cluster)


def restarting_pi(name: str) -> JSON:
    job = upstream_pi("openmpi", name)
    job["apiVersion"] = "kubeflow.org/v2"
    job["spec"]["runPolicy"]["failurePolicy"] = {"maxRestarts": 1, "rules": [
        {"name": "disrupted", "action": "RestartJob", "onReplicaTypes": ["Worker"],
         "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    template = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    template["spec"]["terminationGracePeriodSeconds"] = 1  # the old launcher goes at once (it only sleeps)
    launcher = template["spec"]["containers"][0]
    assert launcher["command"] == ["mpirun"], launcher
    launcher["command"], launcher["args"] = ["sh", "-c", WAIT_ON_FIRST_ATTEMPT, "sh", *launcher["args"]], None
    launcher.setdefault("env", []).append({"name": "RESTART_ATTEMPT", "valueFrom": {
        "fieldRef": {"fieldPath": f"metadata.labels['{ATTEMPT}']"}}})
    return job


def _pods(cluster: LocalCluster, namespace: str, name: str, role: str) -> list[JSON]:
    selector = f"training.kubeflow.org/job-name={name},training.kubeflow.org/job-role={role}"
    pods: list[JSON] = cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _launcher_pods(cluster: LocalCluster, namespace: str, name: str) -> list[JSON]:
    selector = f"training.kubeflow.org/job-name={name},training.kubeflow.org/job-role=launcher"
    pods: list[JSON] = cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}")["items"]
    return pods


def _evict(cluster: LocalCluster, namespace: str, pod: str) -> None:
    cluster.rest.request("POST", f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}})


def test_an_evicted_worker_restarts_the_job_which_then_succeeds(real_cluster: LocalCluster, namespace: str) -> None:
    apply(real_cluster, namespace, restarting_pi("fp"))

    def first_attempt_running() -> bool:
        workers = _pods(real_cluster, namespace, "fp", "worker")
        running = [p for p in workers if p["status"].get("phase") == "Running"
                   and p["metadata"]["labels"].get(ATTEMPT) == "0"]
        return len(running) == 2 and "attempt 0: waiting" in launcher_log(real_cluster, namespace, "fp")

    wait_for(first_attempt_running, 180, 0.5, what="the first attempt's workers Running and its launcher waiting")
    _evict(real_cluster, namespace, "fp-worker-1")
    outcome, final = wait_finished(real_cluster, namespace, "fp", timeout=300)
    assert outcome == "Succeeded", f"{conditions(final)}\n{diagnostics(real_cluster, namespace)}"
    assert final["status"]["restartCount"] == 1
    restarting = conditions(final)["Restarting"]
    assert (restarting["status"], restarting["reason"]) == ("False", "RestartJobFailurePolicyAction"), restarting
    assert restarting["message"].startswith(
        'restart 1/1 by rule "disrupted": Worker pod fp-worker-1: DisruptionTarget=True (EvictionByEvictionAPI)'), \
        restarting
    assert_pi(launcher_log(real_cluster, namespace, "fp"), ["fp-worker-0", "fp-worker-1"])
    launcher = real_cluster.rest.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/fp-launcher")
    assert launcher["metadata"]["labels"][ATTEMPT] == "1"
    ranks = real_cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=training.kubeflow.org/"
                                  "job-name=fp,training.kubeflow.org/job-role=launcher")["items"]
    assert [p["metadata"]["labels"][ATTEMPT] for p in ranks] == ["1"], ranks
    events = real_cluster.kubectl("get", "events", "-n", namespace, "--field-selector",
                                  "involvedObject.name=fp,reason=RestartJobFailurePolicyAction", "-o", "name").stdout
    assert len(events.split()) == 1, events


def test_the_v2_failure_policy_example_runs_as_shipped(real_cluster: LocalCluster, namespace: str) -> None:
    """examples/pi-v2-failure-policy.yaml, with the CPU limits the real node fits: pi, no restart, its policy kept."""
    job: JSON = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    for spec in job["spec"]["mpiReplicaSpecs"].values():
        for container in spec["template"]["spec"]["containers"]:
            container["resources"]["limits"]["cpu"] = CPU_LIMIT
    run_to_success(real_cluster, namespace, job)
    # the launcher pod that succeeded (with restartPolicy Never a launcher that failed, an exit code no rule matches,
    # is retried by its Job as under v2beta1)
    succeeded = [p["metadata"]["name"] for p in _launcher_pods(real_cluster, namespace, "pi-restarts")
                 if p["status"].get("phase") == "Succeeded"]
    assert len(succeeded) == 1, succeeded
    log = real_cluster.kubectl("logs", "-n", namespace, f"pod/{succeeded[0]}", "--tail=-1").stdout
    assert_pi(log, ["pi-restarts-worker-0", "pi-restarts-worker-1"])
    stored = real_cluster.rest.get(f"/apis/kubeflow.org/v2/namespaces/{namespace}/mpijobs/pi-restarts")
    assert stored["spec"]["runPolicy"]["failurePolicy"] == with_failure_policy_defaults(
        job["spec"]["runPolicy"]["failurePolicy"])  # the example's, with the defaults the API server adds
    assert stored["status"].get("restartCount", 0) == 0
