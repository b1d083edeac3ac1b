"""The failurePolicy's decisions, pure (docs/proposals/v2.md, "spec.runPolicy.failurePolicy").

Which failed pods are evaluated, which rule a failed pod satisfies and why, which rule decides (the first one
satisfied by any evaluated pod, naming the pod that failed first), the attempt a job is at, and the attempt
label its pods and launcher Job carry. The sync (``restarts.py``) acts on the ``Decision``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass

from shared.api import constants as c
from shared.api.v2_spec_annotation import annotated_failure_policy
from shared.api.v2types import ExitCodesRequirement, FailurePolicy, FailurePolicyRule, PodConditionPattern
from shared.jsondict import JSONDict

_REPLICA_TYPES = {c.ROLE_LAUNCHER: c.LAUNCHER, c.ROLE_WORKER: c.WORKER}


def failure_policy_of(cached: JSONDict) -> FailurePolicy | None:
    """The failurePolicy a stored (v2beta1) MPIJob keeps in its v2-spec annotation, canonical or not: a job runs
    with the policy its user wrote even where the mutating webhook did not make it canonical."""
    policy = annotated_failure_policy(cached)
    return FailurePolicy.model_validate(policy) if policy is not None else None


def attempt_label(obj: JSONDict | None) -> int:
    """The restart attempt an object is labelled with; 0 without a (numeric) label."""
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    value = labels.get(c.RESTART_ATTEMPT_LABEL)
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def current_attempt(status: JSONDict, objects: Iterable[JSONDict | None], remembered: int = 0) -> int:
    """The attempt a job is at: its ``restartCount``, or the highest attempt label of its launcher Job and workers,
    or the attempt this process last committed (its cache may not show that write yet), whichever is highest."""
    count = status.get("restartCount")
    counted = count if isinstance(count, int) and not isinstance(count, bool) else 0
    return max([counted, remembered, *(attempt_label(obj) for obj in objects)])


def with_attempt(obj: JSONDict, attempt: int) -> JSONDict:
    """A copy of a worker pod or launcher Job (and its pod template) labelled with the attempt."""
    labelled = copy.deepcopy(obj)
    targets = [labelled.setdefault("metadata", {})]
    template = (labelled.get("spec") or {}).get("template")
    if isinstance(template, dict):
        targets.append(template.setdefault("metadata", {}))
    for metadata in targets:
        metadata["labels"] = {**(metadata.get("labels") or {}), c.RESTART_ATTEMPT_LABEL: str(attempt)}
    return labelled


def _conditions(pod: JSONDict) -> list[JSONDict]:
    return list((pod.get("status") or {}).get("conditions") or [])


def _disruption(pod: JSONDict) -> JSONDict | None:
    return next((cond for cond in _conditions(pod) if cond.get("type") == c.POD_DISRUPTION_TARGET
                 and cond.get("status") == c.CONDITION_TRUE), None)


def is_evaluated(pod: JSONDict) -> bool:
    """A pod that failed, not because it was deleted: ``Failed`` and not being deleted, or with
    ``DisruptionTarget=True`` and failed or being deleted (a lost node's pod never gets a phase). A pod deleted
    without that condition (by a suspension, a cleanup, its owner's deletion, a user) is no failure, whatever
    its phase became."""
    failed = (pod.get("status") or {}).get("phase") == "Failed"
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    if _disruption(pod) is not None:
        return failed or deleting
    return failed and not deleting


def _terminated(pod: JSONDict) -> list[tuple[str, JSONDict]]:
    """(container name, state.terminated) of every container and init container that terminated."""
    status = pod.get("status") or {}
    found = []
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        terminated = (container.get("state") or {}).get("terminated")
        if isinstance(terminated, dict):
            found.append((str(container.get("name") or ""), terminated))
    return found


def _condition_cause(patterns: list[PodConditionPattern], pod: JSONDict) -> str | None:
    for pattern in patterns:
        for cond in _conditions(pod):
            if cond.get("type") == pattern.type and cond.get("status") == (pattern.status or c.CONDITION_TRUE):
                cause = f"{cond['type']}={cond['status']}"
                cause += f" ({cond['reason']})" if cond.get("reason") else ""
                return cause + (f": {cond['message']}" if cond.get("message") else "")
    return None


def _exit_code_cause(requirement: ExitCodesRequirement, pod: JSONDict) -> str | None:
    values = set(requirement.values or [])
    for name, terminated in _terminated(pod):
        code = terminated.get("exitCode")
        if not isinstance(code, int) or code == 0:
            continue
        if requirement.container_name is not None and name != requirement.container_name:
            continue
        if (code in values) == (requirement.operator == c.EXIT_CODES_IN):
            return f"container {name} exited with {code}"
    return None


def rule_cause(rule: FailurePolicyRule, role: str, pod: JSONDict) -> str | None:
    """Why ``pod`` (of the ``role`` launcher or worker) satisfies ``rule``, or None when it does not."""
    if rule.on_replica_types is not None and _REPLICA_TYPES.get(role) not in rule.on_replica_types:
        return None
    if rule.on_pod_conditions is not None:
        return _condition_cause(rule.on_pod_conditions, pod)
    if rule.on_exit_codes is not None:
        return _exit_code_cause(rule.on_exit_codes, pod)
    return None


def failed_at(pod: JSONDict) -> tuple[int, str]:
    """When a pod failed, to pick the first: its DisruptionTarget's time, else its latest ``finishedAt``, else
    its deletion time; pods without any come last."""
    disruption = _disruption(pod) or {}
    finished = [str(t.get("finishedAt")) for _, t in _terminated(pod) if t.get("finishedAt")]
    moment = (disruption.get("lastTransitionTime") or max(finished, default="")
              or (pod.get("metadata") or {}).get("deletionTimestamp") or "")
    return (0, str(moment)) if moment else (1, "")


@dataclass(frozen=True)
class Decision:
    """The rule that decides, and the pod (and cause) it names."""

    rule: str
    action: str
    role: str
    pod: str
    cause: str

    @property
    def culprit(self) -> str:
        """``Worker pod pi-worker-1: DisruptionTarget=True (PreemptionByScheduler): ...``"""
        return f"{_REPLICA_TYPES.get(self.role, self.role)} pod {self.pod}: {self.cause}"


def decide(policy: FailurePolicy, pods: Iterable[tuple[str, JSONDict]]) -> Decision | None:
    """The first rule (in order; a rule with an action this version does not know is skipped) satisfied by any
    of the ``(role, pod)`` evaluated, with the pod among its that failed first (then by name); None when no rule
    is satisfied, and the failure is handled as in v2beta1."""
    evaluated = [(role, pod) for role, pod in pods if is_evaluated(pod)]
    for rule in policy.rules or []:
        if rule.action not in c.FAILURE_POLICY_ACTIONS:
            continue
        matches = [(failed_at(pod), str(pod["metadata"]["name"]), role, cause) for role, pod in evaluated
                   if (cause := rule_cause(rule, role, pod)) is not None]
        if matches:
            _, name, role, cause = min(matches)
            return Decision(str(rule.name), str(rule.action), role, name, cause)
    return None
