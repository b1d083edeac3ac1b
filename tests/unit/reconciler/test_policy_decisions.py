"""The failurePolicy's pure part: which pods are evaluated, which rule a pod satisfies, which rule decides, the
attempt a job is at and the attempt label (docs/proposals/v2.md, "Matching and order")."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.mpijob.policy_decisions import (
    Decision,
    attempt_label,
    current_attempt,
    decide,
    failure_policy_of,
    is_evaluated,
    with_attempt,
)
from shared.api.conversion import to_v2beta1
from shared.api.v2types import FailurePolicy

JSON = dict[str, Any]
DISRUPTED = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
             "message": "Preempted by a higher priority pod", "lastTransitionTime": "2026-01-01T00:00:05Z"}


def pod(name: str, phase: str = "Failed", conditions: list[JSON] | None = None,
        exits: dict[str, int] | None = None, deleting: str | None = None, finished: str = "2026-01-01T00:00:10Z",
        init: dict[str, int] | None = None) -> JSON:
    def statuses(codes: dict[str, int] | None) -> list[JSON]:
        return [{"name": n, "state": {"terminated": {"exitCode": code, "finishedAt": finished}}}
                for n, code in (codes or {}).items()]
    metadata: JSON = {"name": name, **({"deletionTimestamp": deleting} if deleting else {})}
    return {"metadata": metadata, "status": {"phase": phase, "conditions": conditions or [],
                                             "containerStatuses": statuses(exits),
                                             "initContainerStatuses": statuses(init)}}


def policy(*rules: JSON, max_restarts: int = 3) -> FailurePolicy:
    return FailurePolicy.model_validate({"maxRestarts": max_restarts, "rules": list(rules)})


DISRUPTION_RULE = {"name": "disrupted", "action": "RestartJob", "onPodConditions": [{"type": "DisruptionTarget"}]}
LAUNCHER_EXIT_2 = {"name": "badArguments", "action": "FailJob", "onReplicaTypes": ["Launcher"],
                   "onExitCodes": {"operator": "In", "values": [2]}}
WORKER_STOPPED = {"name": "workerStopped", "action": "RestartJob", "onReplicaTypes": ["Worker"],
                  "onExitCodes": {"operator": "NotIn", "values": [0]}}
PROPOSAL = policy(LAUNCHER_EXIT_2, DISRUPTION_RULE, WORKER_STOPPED)


@pytest.mark.parametrize(("candidate", "evaluated"), [
    (pod("w", "Failed"), True),
    (pod("w", "Running"), False),
    (pod("w", "Succeeded"), False),
    (pod("w", "Running", [DISRUPTED], deleting="2026-01-01T00:00:06Z"), True),
    (pod("w", "Running", deleting="2026-01-01T00:00:06Z"), False),  # kubectl delete: no DisruptionTarget
    (pod("w", "Running", [DISRUPTED]), False),  # not being deleted (yet)
    (pod("w", "Running", [{**DISRUPTED, "status": "False"}], deleting="2026-01-01T00:00:06Z"), False),
    # the kubelet ends a deleted pod Failed (sshd exits 255 on SIGTERM): a suspension's deletion is no failure
    (pod("w", "Failed", exits={"worker": 255}, deleting="2026-01-01T00:00:06Z"), False),
    (pod("w", "Failed", [DISRUPTED], exits={"worker": 137}, deleting="2026-01-01T00:00:06Z"), True),
    (pod("w", "Failed", [DISRUPTED]), True),  # evicted by the kubelet: never deleted by anyone
], ids=["failed", "running", "succeeded", "disrupted-deleting", "deleted-plainly", "disrupted-not-deleting",
        "disruption-false", "deleted-then-failed", "disrupted-deleted-then-failed", "disrupted-failed"])
def test_which_pods_are_evaluated(candidate: JSON, evaluated: bool) -> None:
    assert is_evaluated(candidate) is evaluated


@pytest.mark.parametrize(("pods", "expected"), [
    ([], None),
    ([("worker", pod("pi-worker-0", "Running"))], None),
    ([("worker", pod("pi-worker-1", conditions=[DISRUPTED]))],
     Decision("disrupted", "RestartJob", "worker", "pi-worker-1",
              "DisruptionTarget=True (PreemptionByScheduler): Preempted by a higher priority pod")),
    ([("worker", pod("pi-worker-1", "Running", [DISRUPTED], deleting="2026-01-01T00:00:06Z"))],
     Decision("disrupted", "RestartJob", "worker", "pi-worker-1",
              "DisruptionTarget=True (PreemptionByScheduler): Preempted by a higher priority pod")),
    ([("launcher", pod("pi-launcher-x", exits={"launcher": 2}))],
     Decision("badArguments", "FailJob", "launcher", "pi-launcher-x", "container launcher exited with 2")),
    ([("launcher", pod("pi-launcher-x", exits={"launcher": 137}))], None),  # In [2] only; workerStopped: Worker
    ([("worker", pod("pi-worker-0", exits={"worker": 2}))],  # badArguments is for the Launcher only
     Decision("workerStopped", "RestartJob", "worker", "pi-worker-0", "container worker exited with 2")),
    ([("worker", pod("pi-worker-0", exits={"worker": 0}))], None),  # exit code 0 is never a match
    ([("worker", pod("pi-worker-0"))], None),  # no terminated container: no exit-code match (yet)
    # The first rule satisfied decides, whatever the order of the pods.
    ([("worker", pod("pi-worker-0", exits={"worker": 1})), ("launcher", pod("pi-launcher-x", exits={"l": 2}))],
     Decision("badArguments", "FailJob", "launcher", "pi-launcher-x", "container l exited with 2")),
    ([("worker", pod("pi-worker-0", exits={"worker": 1})), ("worker", pod("pi-worker-1", conditions=[DISRUPTED]))],
     Decision("disrupted", "RestartJob", "worker", "pi-worker-1",
              "DisruptionTarget=True (PreemptionByScheduler): Preempted by a higher priority pod")),
], ids=["nothing", "running", "disrupted", "disrupted-deleting", "launcher-exit-2", "launcher-137-no-rule",
        "worker-exit-2", "exit-0", "no-terminated-container", "first-rule-decides", "second-rule-before-third"])
def test_the_first_rule_satisfied_decides(pods: list[tuple[str, JSON]], expected: Decision | None) -> None:
    assert decide(PROPOSAL, pods) == expected


def test_among_the_pods_of_the_rule_the_first_failed_is_named() -> None:
    later = pod("pi-worker-0", conditions=[{**DISRUPTED, "lastTransitionTime": "2026-01-01T00:00:09Z"}])
    earlier = pod("pi-worker-3", conditions=[DISRUPTED])
    no_time = pod("pi-worker-1", conditions=[{k: v for k, v in DISRUPTED.items() if k != "lastTransitionTime"}],
                  finished="")
    found = decide(PROPOSAL, [("worker", later), ("worker", no_time), ("worker", earlier)])
    assert found is not None
    assert found.pod == "pi-worker-3"
    stopped = [("worker", pod("pi-worker-2", exits={"w": 1}, finished="2026-01-01T00:01:00Z")),
               ("worker", pod("pi-worker-5", exits={"w": 1}, finished="2026-01-01T00:00:30Z"))]
    by_exit = decide(policy(WORKER_STOPPED), stopped)
    assert by_exit == Decision("workerStopped", "RestartJob", "worker", "pi-worker-5", "container w exited with 1")


@pytest.mark.parametrize(("requirement", "exits", "init", "cause"), [
    ({"operator": "In", "values": [1, 3]}, {"a": 3}, None, "container a exited with 3"),
    ({"operator": "In", "values": [1, 3]}, {"a": 4}, None, None),
    ({"operator": "NotIn", "values": [1, 3]}, {"a": 1, "b": 4}, None, "container b exited with 4"),
    ({"operator": "NotIn", "values": [1, 3]}, {"a": 1}, None, None),
    ({"operator": "In", "values": [5], "containerName": "b"}, {"a": 5, "b": 0}, None, None),
    ({"operator": "In", "values": [5], "containerName": "b"}, {"a": 5, "b": 5}, None, "container b exited with 5"),
    ({"operator": "In", "values": [5], "containerName": "setup"}, {}, {"setup": 5}, "container setup exited with 5"),
], ids=["in", "not-in-values", "not-in", "all-excluded", "container-name-other", "container-name", "init-container"])
def test_exit_codes(requirement: JSON, exits: dict[str, int], init: dict[str, int] | None, cause: str | None) -> None:
    rule = {"name": "r", "action": "FailJob", "onExitCodes": requirement}
    found = decide(policy(rule), [("worker", pod("pi-worker-0", exits=exits, init=init))])
    assert found == (Decision("r", "FailJob", "worker", "pi-worker-0", cause) if cause else None)


def test_replica_types_and_condition_status_and_unknown_actions() -> None:
    unknown = {"name": "later", "action": "RestartJobAndIgnoreMaxRestarts",
               "onPodConditions": [{"type": "DisruptionTarget"}]}
    launcher_only = {"name": "l", "action": "FailJob", "onReplicaTypes": ["Launcher"],
                     "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    unknown_status = {"name": "u", "action": "FailJob", "onPodConditions": [{"type": "Ready", "status": "Unknown"}]}
    disrupted = pod("pi-worker-0", conditions=[DISRUPTED])
    assert decide(policy(unknown, launcher_only), [("worker", disrupted)]) is None
    assert decide(policy(unknown, launcher_only), [("launcher", disrupted)]) == Decision(
        "l", "FailJob", "launcher", "pi-worker-0",
        "DisruptionTarget=True (PreemptionByScheduler): Preempted by a higher priority pod")
    unready = pod("pi-worker-0", conditions=[{"type": "Ready", "status": "Unknown"}])
    assert decide(policy(unknown_status), [("worker", unready)]) == Decision(
        "u", "FailJob", "worker", "pi-worker-0", "Ready=Unknown")


def test_the_culprit_names_the_replica_type() -> None:
    decision = Decision("disrupted", "RestartJob", "worker", "pi-worker-1", "DisruptionTarget=True")
    assert decision.culprit == "Worker pod pi-worker-1: DisruptionTarget=True"
    assert Decision("x", "FailJob", "launcher", "pi-launcher-a", "c").culprit == "Launcher pod pi-launcher-a: c"


def test_the_policy_is_read_from_the_annotation_as_conversion_keeps_it() -> None:
    v2 = {"apiVersion": "kubeflow.org/v2", "kind": "MPIJob", "metadata": {"name": "pi"},
          "spec": {"runPolicy": {"failurePolicy": {"maxRestarts": 3, "rules": [DISRUPTION_RULE]}}}}
    assert failure_policy_of(to_v2beta1(v2)) == policy(DISRUPTION_RULE)
    assert failure_policy_of({"metadata": {"name": "pi"}, "spec": {"runPolicy": {}}}) is None
    broken = {"metadata": {"annotations": {"mpijobs.kubeflow.org/v2-spec": "{"}}, "spec": {"runPolicy": {}}}
    assert failure_policy_of(broken) is None


def test_attempts() -> None:
    labelled = {"metadata": {"labels": {"mpijobs.kubeflow.org/restart-attempt": "2"}}}
    assert [attempt_label(None), attempt_label({}), attempt_label(labelled),
            attempt_label({"metadata": {"labels": {"mpijobs.kubeflow.org/restart-attempt": "x"}}})] == [0, 0, 2, 0]
    assert current_attempt({}, []) == 0
    assert current_attempt({"restartCount": 1}, [None, labelled]) == 2  # a status that lost the count
    assert current_attempt({"restartCount": 3}, [labelled]) == 3
    assert current_attempt({"restartCount": 1}, [labelled], remembered=4) == 4  # a cache behind our own write
    assert current_attempt({"restartCount": True}, []) == 0


def test_the_attempt_label_goes_on_the_object_and_its_pod_template() -> None:
    job: JSON = {"metadata": {"name": "pi-launcher", "labels": {"a": "b"}},
           "spec": {"template": {"metadata": {"labels": {"c": "d"}}, "spec": {}}}}
    assert with_attempt(job, 1) == {
        "metadata": {"name": "pi-launcher", "labels": {"a": "b", "mpijobs.kubeflow.org/restart-attempt": "1"}},
        "spec": {"template": {"metadata": {"labels": {"c": "d", "mpijobs.kubeflow.org/restart-attempt": "1"}},
                              "spec": {}}}}
    assert job["metadata"]["labels"] == {"a": "b"}  # a copy
    assert with_attempt({"metadata": {"name": "w"}, "spec": {"containers": []}}, 0) == {
        "metadata": {"name": "w", "labels": {"mpijobs.kubeflow.org/restart-attempt": "0"}}, "spec": {"containers": []}}


