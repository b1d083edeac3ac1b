"""The failurePolicy on the real control plane (docs/proposals/v2.md, "What a restart does, step by step").

A kubeflow.org/v2 MPIJob with a RestartJob rule on DisruptionTarget: a worker failing with that condition (its
status set as the kubelet sets an evicted pod's) restarts the job, up to maxRestarts, then fails it
(ReachedMaxRestarts). The reconciler is restarted after the first restart: the count comes back from the status,
and nothing is counted, deleted or created twice (the API server's audit log says so). A reconciler stopped
between the restart's status write and its teardown is a unit test (tests/unit/reconciler/
test_sync_failure_policy.py): a stop cuts requests whose effect the audit log cannot tell.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.audit import audit_events, resource_of
from hack.devcluster.mpijobs import mpijob
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl

pytestmark = pytest.mark.usefixtures("api_v2")  # the jobs are created through kubeflow.org/v2, which is opt-in

JSON = dict[str, Any]
HANG = {"test.mpijob/outcome": "hang"}
ATTEMPT = "mpijobs.kubeflow.org/restart-attempt"
RULE = {"name": "disrupted", "action": "RestartJob", "onPodConditions": [{"type": "DisruptionTarget"}]}
POLICY = {"maxRestarts": 2, "rules": [RULE]}
DISRUPTED = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
             "message": "Eviction API: evicting", "lastTransitionTime": "2026-01-01T00:00:00Z"}
CAUSE = "Worker pod pi-worker-1: DisruptionTarget=True (EvictionByEvictionAPI): Eviction API: evicting"


def v2_job(jobs: Jobs) -> JSON:
    job = mpijob("pi", 2, launcher_labels=HANG)
    job["apiVersion"] = "kubeflow.org/v2"
    job["spec"]["runPolicy"]["failurePolicy"] = POLICY
    return jobs.cluster.rest.create(jobs.path("mpijobs", group="kubeflow.org/v2"), job)


def wait_attempt(jobs: Jobs, attempt: int) -> list[JSON]:
    """The attempt's two workers, Running, once the job is Running again."""
    def running() -> tuple[list[JSON]] | None:
        pods = [p for p in jobs.workers("pi") if p["metadata"]["labels"].get(ATTEMPT) == str(attempt)
                and p["status"].get("phase") == "Running"]
        cond = jobs.condition("pi", "Running")
        return (pods,) if len(pods) == 2 and cond is not None and cond["status"] == "True" else None

    return until(running, timeout=90, what=f"attempt {attempt} running")[0]


def disrupt(jobs: Jobs, name: str) -> None:
    """The pod as the kubelet leaves an evicted one: Failed, with the DisruptionTarget condition."""
    jobs.cluster.rest.request("PATCH", jobs.path("pods", name) + "/status", {"status": {
        "phase": "Failed", "reason": "Evicted", "message": "evicted", "conditions": [DISRUPTED]}},
        content_type="application/merge-patch+json")


def reasons(jobs: Jobs) -> Counter[str]:
    """The job's events by reason (several in one second have no order)."""
    return Counter(e["reason"] for e in jobs.events("pi"))


def code(event: JSON) -> object:
    return (event.get("responseStatus") or {}).get("code")


def writes(log: Path, username: str, namespace: str, offset: int) -> Counter[str]:
    """The creates and deletes of pods and Jobs ``username`` asked for in ``namespace`` since byte ``offset``, by
    object, with their answers' codes."""
    return Counter(f"{e['verb']} {resource_of(e)} {e['objectRef'].get('name')}: {code(e)}"
                   for e in audit_events(log, offset=offset)
                   if (e.get("user") or {}).get("username") == username and e["objectRef"].get("namespace") == namespace
                   and e["verb"] in ("create", "delete") and resource_of(e) in ("pods", "jobs"))


def test_disrupted_workers_restart_the_job_up_to_max_restarts_then_fail_it(
        cluster: LocalCluster, namespace: str, reconciler: ReconcilerControl) -> None:
    jobs = Jobs(cluster, namespace)
    log = cluster.audit_log
    assert log is not None
    offset = log.stat().st_size if log.exists() else 0
    v2_job(jobs)
    first = wait_attempt(jobs, 0)
    disrupt(jobs, "pi-worker-1")
    until(lambda: (jobs.get("pi").get("status") or {}).get("restartCount") == 1 or None, timeout=60,
          what="the first restart committed")
    second = wait_attempt(jobs, 1)
    # A new process knows the count from the status alone: it neither recreates the running attempt nor
    # forgets the restart made (the next one is 2/2, the one after fails the job).
    reconciler.restart()
    assert {p["metadata"]["uid"] for p in second}.isdisjoint(p["metadata"]["uid"] for p in first)
    restarting = jobs.condition("pi", "Restarting")
    assert restarting is not None
    assert {k: restarting[k] for k in ("status", "reason", "message")} == {
        "status": "False", "reason": "RestartJobFailurePolicyAction",
        "message": f'restart 1/2 by rule "disrupted": {CAUSE}'}
    disrupt(jobs, "pi-worker-1")
    wait_attempt(jobs, 2)
    disrupt(jobs, "pi-worker-1")
    failed = jobs.wait_condition("pi", "Failed", timeout=60)
    assert (failed["reason"], failed["message"]) == (
        "ReachedMaxRestarts", f"MPIJob {namespace}/pi has failed: reached maxRestarts (2), rule \"disrupted\": {CAUSE}")
    jobs.wait_launcher("pi", suspended=True, timeout=30)
    left = jobs.wait_workers("pi", 1, timeout=60)  # cleanPodPolicy Running: the running worker released
    assert [(p["metadata"]["name"], p["status"]["phase"]) for p in left] == [("pi-worker-1", "Failed")]
    v2 = cluster.rest.get(jobs.path("mpijobs", "pi", "kubeflow.org/v2"))
    assert v2["status"]["restartCount"] == 2
    assert v2["spec"]["runPolicy"]["failurePolicy"] == {"maxRestarts": 2, "rules": [  # the status defaulted
        {**RULE, "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
    assert reasons(jobs) == Counter({"MPIJobCreated": 1, "MPIJobRunning": 3, "RestartJobFailurePolicyAction": 2,
                                     "ReachedMaxRestarts": 1})
    # Nothing duplicated: each attempt created each worker and the launcher Job once; each restart deleted the
    # launcher Job once and each worker once; the end released the running worker.
    username = reconciler.credentials.username
    assert writes(log, username, namespace, offset) == Counter({
        "create pods pi-worker-0: 201": 3, "create pods pi-worker-1: 201": 3, "create jobs pi-launcher: 201": 3,
        "delete jobs pi-launcher: 200": 2, "delete pods pi-worker-0: 200": 3, "delete pods pi-worker-1: 200": 2})
