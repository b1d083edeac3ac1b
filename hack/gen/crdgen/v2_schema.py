"""The kubeflow.org/v2 schema: v2beta1's plus spec.runPolicy.failurePolicy and the checks v2 moves into the API
server (enums, replica keys, minimums, CEL rules), as docs/proposals/v2.md lists them. Nothing else differs."""

from __future__ import annotations

import copy
from typing import Any

from hack.gen.crdgen.mpijob_schema import obj
from hack.gen.crdgen.structural import field, sorted_schema

Schema = dict[str, Any]
RULES = "x-kubernetes-validations"


def _rule(rule: str, message: str) -> Schema:
    return {"message": message, "rule": rule}


def _with(node: Schema, **extra: Any) -> None:
    """Set schema keywords on ``node`` in place, keeping its keys sorted."""
    merged = sorted_schema({**node, **extra})
    node.clear()
    node.update(merged)


def v2_schema(v2beta1: Schema) -> Schema:
    """A new schema: ``v2beta1``'s with v2's additions and checks."""
    schema = copy.deepcopy(v2beta1)
    spec = schema["properties"]["spec"]
    props = spec["properties"]
    _with(props["launcherCreationPolicy"], enum=["AtStartup", "WaitForWorkersReady"])
    _with(props["slotsPerWorker"], minimum=0)
    _replica_specs(props["mpiReplicaSpecs"])
    _run_policy(props["runPolicy"])
    has_policy = "(has({0}.runPolicy) && has({0}.runPolicy.failurePolicy))"
    now, before = has_policy.format("self"), has_policy.format("oldSelf")
    _with(spec, **{RULES: [_rule(f"{now} == {before} && (!{now} || "
                                 "self.runPolicy.failurePolicy == oldSelf.runPolicy.failurePolicy)",
                                 "failurePolicy is immutable")]})
    return schema


def _replica_specs(node: Schema) -> None:
    replica = node["additionalProperties"]["properties"]
    _with(replica["restartPolicy"], enum=["Never", "OnFailure"])
    _with(node, maxProperties=2, **{RULES: [
        _rule("self.all(k, k == 'Launcher' || k == 'Worker')", "only Launcher and Worker are supported"),
        _rule("'Launcher' in self", "must have Launcher replica spec"),
        _rule("!('Launcher' in self) || !has(self.Launcher.replicas) || self.Launcher.replicas == 1",
              "Launcher replicas must be 1"),
        _rule("!('Worker' in self) || !has(self.Worker.replicas) || self.Worker.replicas >= 1",
              "Worker replicas must be greater than or equal to 1"),
    ]})


def _run_policy(node: Schema) -> None:
    props = node["properties"]
    _with(props["cleanPodPolicy"], enum=["All", "Running", "None"])
    _with(props["managedBy"], enum=["kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue"])
    for name in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit"):
        _with(props[name], minimum=0)
    props["failurePolicy"] = failure_policy_schema()
    node["properties"] = dict(sorted(props.items()))
    immutable = _rule("has(self.managedBy) == has(oldSelf.managedBy) && "
                      "(!has(self.managedBy) || self.managedBy == oldSelf.managedBy)", "managedBy is immutable")
    _with(node, **{RULES: [{**immutable, "fieldPath": ".managedBy"}]})


def failure_policy_schema() -> Schema:
    """FailurePolicy (docs/proposals/v2.md, "Schema")."""
    return obj(
        "FailurePolicy restarts or fails the job when a launcher or worker pod fails in a way a rule matches. "
        "Immutable. Without it a failed pod is handled as in kubeflow.org/v2beta1.",
        {
            "maxRestarts": field("integer", "How many times RestartJob rules may restart the job; once reached, "
                                 "a RestartJob rule fails it. Required with a RestartJob rule.", format="int32",
                                 minimum=0),
            "rules": field("array", "Rules tried in order; the first one a failed pod matches decides.",
                           items=_rule_schema(), minItems=1, maxItems=20,
                           **{"x-kubernetes-list-map-keys": ["name"], "x-kubernetes-list-type": "map"}),
        },
        required=["rules"],
        **{RULES: [_rule("has(self.maxRestarts) || !self.rules.exists(r, r.action == 'RestartJob')",
                         "maxRestarts is required with a RestartJob rule")]},
    )


def _rule_schema() -> Schema:
    return obj(
        "FailurePolicyRule matches failed pods by replica type and by pod condition or container exit codes.",
        {
            "name": field("string", "The rule's name, unique in the policy; shown in the condition and event.",
                          maxLength=63, pattern="^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"),
            "action": field("string", "RestartJob deletes the launcher Job and every worker and recreates them "
                            "(the SSH Secret is kept); FailJob fails the job.", enum=["RestartJob", "FailJob"]),
            "onReplicaTypes": field("array", "The replica types whose pods the rule matches; both when unset.",
                                    items=field("string", None, enum=["Launcher", "Worker"]), minItems=1,
                                    maxItems=2, **{"x-kubernetes-list-type": "set"}),
            "onPodConditions": field("array", "Matches a pod that has one of these conditions, e.g. "
                                     "DisruptionTarget (eviction, preemption, a lost node).",
                                     items=_pod_condition_schema(), minItems=1, maxItems=20),
            "onExitCodes": _exit_codes_schema(),
        },
        required=["name", "action"],
        **{RULES: [_rule("has(self.onPodConditions) != has(self.onExitCodes)",
                         "exactly one of onPodConditions and onExitCodes is required")]},
    )


def _pod_condition_schema() -> Schema:
    return obj(
        "PodConditionPattern matches a pod condition by type and status.",
        {
            "type": field("string", "The pod condition type, e.g. DisruptionTarget.", maxLength=316),
            "status": field("string", "The condition's status. Defaults to True.", default="True",
                            enum=["True", "False", "Unknown"]),
        },
        required=["type"],
    )


def _exit_codes_schema() -> Schema:
    return obj(
        "ExitCodesRequirement matches a pod by the exit codes of its terminated containers (batch/v1's "
        "PodFailurePolicyOnExitCodesRequirement); exit code 0 is ignored.",
        {
            "containerName": field("string", "Only this container's exit code; every container's when unset.",
                                   maxLength=63),
            "operator": field("string", "In: one exit code is in values; NotIn: one is not.", enum=["In", "NotIn"]),
            "values": field("array", "Exit codes, sorted ascending.", items=field("integer", None, format="int32"),
                            minItems=1, maxItems=255, **{"x-kubernetes-list-type": "set",
                                                         RULES: [_rule("self.isSorted()",
                                                                       "values must be sorted ascending")]}),
        },
        required=["operator", "values"],
        **{RULES: [_rule("self.operator != 'In' || !(0 in self.values)", "0 is not allowed with the In operator")]},
    )
