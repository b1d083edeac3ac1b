"""The kubeflow.org/v2 schema: v2beta1's plus spec.runPolicy.failurePolicy, spec.workerBackend and the checks v2 moves
into the API server (enums, replica keys, minimums, CEL rules), as docs/proposals/v2.md lists them (workerBackend:
docs/proposals/indexed-job-workers.md). Nothing else differs."""

from __future__ import annotations

import copy
from typing import Any

from hack.gen.crdgen.structural import sorted_schema
from shared.api.v2types import FAILURE_POLICY_SCHEMA, WORKER_BACKEND_IMMUTABLE, WORKER_BACKEND_SCHEMA

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
    props["workerBackend"] = _sorted(WORKER_BACKEND_SCHEMA)  # docs/proposals/indexed-job-workers.md
    spec["properties"] = dict(sorted(props.items()))
    has_policy = "(has({0}.runPolicy) && has({0}.runPolicy.failurePolicy))"
    now, before = has_policy.format("self"), has_policy.format("oldSelf")
    _with(spec, **{RULES: [_rule(f"{now} == {before} && (!{now} || "
                                 "self.runPolicy.failurePolicy == oldSelf.runPolicy.failurePolicy)",
                                 "failurePolicy is immutable"),
                        {**_rule(WORKER_BACKEND_IMMUTABLE.rule, WORKER_BACKEND_IMMUTABLE.message),
                         "fieldPath": ".workerBackend"}]})
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
    props["failurePolicy"] = _sorted(FAILURE_POLICY_SCHEMA)  # docs/proposals/v2.md, "Schema"
    node["properties"] = dict(sorted(props.items()))
    immutable = _rule("has(self.managedBy) == has(oldSelf.managedBy) && "
                      "(!has(self.managedBy) || self.managedBy == oldSelf.managedBy)", "managedBy is immutable")
    _with(node, **{RULES: [{**immutable, "fieldPath": ".managedBy"}]})


def _sorted(node: Any) -> Any:
    """A copy of ``node`` with every object's keys in alphabetical order, as controller-gen writes them."""
    if isinstance(node, dict):
        return {key: _sorted(value) for key, value in sorted(node.items())}
    return [_sorted(item) for item in node] if isinstance(node, list) else node
