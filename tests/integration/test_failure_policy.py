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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.audit import audit_events, resource_of
from hack.devcluster.mpijobs import mpijob
from shared.api.v2_spec_annotation import canonical_json
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl

pytestmark = pytest.mark.usefixtures("api_v2")  # the jobs are created through kubeflow.org/v2, which is opt-in

JSON = dict[str, Any]
HANG = {"test.mpijob/outcome": "hang"}
V2_SPEC = "mpijobs.kubeflow.org/v2-spec"
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


FAIL_WITH_2 = {"test.mpijob/exit-code": "2"}
BAD_ARGUMENTS = {"name": "badArguments", "action": "FailJob", "onReplicaTypes": ["Launcher"],
                 "onExitCodes": {"operator": "In", "values": [2]}}


def annotated_job(name: str, launcher_labels: dict[str, str], launcher_annotations: dict[str, str] | None = None,
                  rule: JSON = BAD_ARGUMENTS, **run_policy: Any) -> JSON:
    """A v2beta1 MPIJob whose failurePolicy (by default a FailJob rule on the launcher exiting 2) is in the
    v2-spec annotation, as a user of v2beta1 writes it."""
    job = mpijob(name, 2, launcher_labels=launcher_labels, launcher_annotations=launcher_annotations)
    policy = {"maxRestarts": 3, "rules": [rule]}
    job["spec"]["runPolicy"].update(run_policy)
    job["metadata"]["annotations"] = {V2_SPEC: canonical_json({"spec": {"runPolicy": {"failurePolicy": policy}}})}
    return job


def failed_by_rule(jobs: Jobs, name: str, **run_policy: Any) -> JSON:
    """Create a job whose launcher exits 2; its Failed condition once the rule failed it."""
    jobs.create(annotated_job(name, {"test.mpijob/outcome": "fail"}, FAIL_WITH_2, **run_policy))
    failed = jobs.wait_condition(name, "Failed", timeout=90)
    assert failed["reason"] == "FailJobFailurePolicyAction", failed
    return failed


def test_a_job_failed_by_a_rule_deleted_and_created_again_under_its_name_starts_clean(
        cluster: LocalCluster, namespace: str, reconciler: ReconcilerControl) -> None:
    """The predecessor's failed launcher pod (exit 2), removed by the garbage collector after the MPIJob's
    delete event, is no failure of the new job: it runs, at restart 0, without a Restarting condition."""
    jobs = Jobs(cluster, namespace)
    failed_by_rule(jobs, "pi")
    old = jobs.get("pi")["metadata"]["uid"]
    jobs.delete("pi")
    jobs.wait_gone("mpijobs", "pi", "kubeflow.org/v2beta1")
    jobs.wait_gone("jobs", "pi-launcher", "batch/v1")
    until(lambda: not jobs.pods("training.kubeflow.org/job-name=pi") or None, timeout=60, what="the old pods gone")
    new = jobs.create(annotated_job("pi", HANG))["metadata"]["uid"]
    assert new != old
    def ran_or_ended() -> JSON | None:
        status: JSON = jobs.get("pi").get("status") or {}
        kinds = {c["type"] for c in status.get("conditions") or [] if c["status"] == "True"}
        return status if kinds & {"Running", "Failed", "Restarting"} else None

    status = until(ran_or_ended, timeout=90, what="the new pi Running (or failed, or restarting)")
    assert (status.get("restartCount"), sorted(c["type"] for c in status["conditions"])) == (
        0, ["Created", "Running", "WorkersReady"]), status
    new_events = [e for e in jobs.events("pi") if e["involvedObject"].get("uid") == new]
    assert Counter(e["reason"] for e in new_events) == Counter({"MPIJobCreated": 1, "MPIJobRunning": 1})


def test_the_launcher_job_a_rule_stopped_is_deleted_after_ttl_seconds_after_finished(
        cluster: LocalCluster, namespace: str, reconciler: ReconcilerControl) -> None:
    """A job failed by a FailJob rule keeps its launcher Job suspended; ttlSecondsAfterFinished: 5 deletes it
    (once) 5 s after the job's completionTime, and the job stays as it ended."""
    jobs = Jobs(cluster, namespace)
    log = cluster.audit_log
    assert log is not None
    offset = log.stat().st_size if log.exists() else 0
    failed = failed_by_rule(jobs, "ttl", ttlSecondsAfterFinished=5)
    jobs.wait_launcher("ttl", suspended=True, timeout=30)
    ended = jobs.get("ttl")["status"]
    jobs.wait_gone("jobs", "ttl-launcher", "batch/v1", timeout=60)
    assert (datetime.now(UTC) - datetime.fromisoformat(ended["completionTime"])).total_seconds() >= 5
    status = jobs.get("ttl")["status"]
    assert (status["completionTime"], jobs.condition("ttl", "Failed")) == (ended["completionTime"], failed)
    username = reconciler.credentials.username
    launcher_writes = {k: v for k, v in writes(log, username, namespace, offset).items() if "jobs ttl-launcher" in k}
    assert launcher_writes == {"create jobs ttl-launcher: 201": 1, "delete jobs ttl-launcher: 200": 1}


WORKER_STOPPED = {"name": "workerStopped", "action": "RestartJob", "onReplicaTypes": ["Worker"],
                  "onExitCodes": {"operator": "NotIn", "values": [0]}}
HOLD = "test.mpijob/hold"


def test_the_workers_a_suspension_deleted_are_no_failures_after_the_resume(
        cluster: LocalCluster, namespace: str, reconciler: ReconcilerControl) -> None:
    """Resumed while the workers its suspension deleted are still terminating, Failed with exit 255 (as sshd ends
    on SIGTERM; a finalizer of the test keeps them): a workerStopped rule (NotIn [0]) does not restart the job."""
    jobs = Jobs(cluster, namespace)
    jobs.create(annotated_job("held", HANG, rule=WORKER_STOPPED))
    workers = jobs.wait_workers("held", 2, phase="Running", timeout=90)
    jobs.wait_condition("held", "Running", timeout=60)
    for pod in workers:
        cluster.rest.merge_patch(jobs.path("pods", pod["metadata"]["name"]), {"metadata": {"finalizers": [HOLD]}})
    jobs.patch("held", {"spec": {"runPolicy": {"suspend": True}}})
    selector = "training.kubeflow.org/job-name=held,training.kubeflow.org/job-role=worker"
    until(lambda: all(p["metadata"].get("deletionTimestamp") for p in jobs.pods(selector)) or None, timeout=30,
          what="the workers terminating")
    for pod in workers:
        jobs.cluster.rest.request("PATCH", jobs.path("pods", pod["metadata"]["name"]) + "/status", {"status": {
            "phase": "Failed", "containerStatuses": [{
                "name": pod["spec"]["containers"][0]["name"], "image": pod["spec"]["containers"][0]["image"],
                "imageID": "", "ready": False, "restartCount": 0,
                "state": {"terminated": {"exitCode": 255, "reason": "Error"}}}]}},
            content_type="application/merge-patch+json")
    jobs.wait_condition("held", "Suspended", timeout=30)
    jobs.patch("held", {"spec": {"runPolicy": {"suspend": False}}})
    def resumed() -> JSON | None:  # the resume's sync judged the pods: Suspended no longer True, or a restart
        status: JSON = jobs.get("held").get("status") or {}
        kinds = {c["type"] for c in status.get("conditions") or [] if c["status"] == "True"}
        return status if "Suspended" not in kinds or "Restarting" in kinds or status.get("restartCount") else None

    status = until(resumed, timeout=30, what="held resumed")
    assert (status.get("restartCount"), "Restarting" in {c["type"] for c in status["conditions"]}) == (0, False)
    for pod in workers:
        cluster.rest.merge_patch(jobs.path("pods", pod["metadata"]["name"]), {"metadata": {"finalizers": None}})
    again = jobs.wait_workers("held", 2, phase="Running", timeout=90)
    assert {p["metadata"]["uid"] for p in again}.isdisjoint(p["metadata"]["uid"] for p in workers)
    jobs.wait_condition("held", "Running", timeout=60)
    status = jobs.get("held")["status"]
    assert (status.get("restartCount"), jobs.condition("held", "Restarting")) == (0, None)
    assert "RestartJobFailurePolicyAction" not in reasons_of(jobs, "held")


def reasons_of(jobs: Jobs, job: str) -> Counter[str]:
    return Counter(e["reason"] for e in jobs.events(job))
