"""A kubeflow.org/v2 failurePolicy on the real node: a worker evicted mid-run restarts the job, whose next attempt
prints pi and succeeds (docs/proposals/v2.md, "What a restart does, step by step").

The worker is evicted through the Eviction API (what `kubectl drain` does), which gives the pod the condition
`DisruptionTarget=True` before deleting it; `kubectl delete pod` would add none, and the job's rule matches on
that condition (a plain delete is matched by exit codes only, a case the proposal documents).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hack.devcluster import LocalCluster, api_v2
from hack.devcluster.mpijobs import JSON, conditions, diagnostics, launcher_log, wait_finished
from hack.devcluster.operator_deploy import enable_api_v2
from hack.devcluster.wait import wait_for
from tests.e2e.jobs import apply, assert_pi, upstream_pi

ATTEMPT = "mpijobs.kubeflow.org/restart-attempt"
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
