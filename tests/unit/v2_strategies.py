"""Hypothesis strategies for MPIJobs as the API server stores and serves them, in v2beta1 and in v2.

v2beta1 objects may carry the annotation mpijobs.kubeflow.org/v2-spec with any value (canonical, reordered,
padded, other paths, unknown fields, wrong types, not JSON, not a string), the annotation
mpijobs.kubeflow.org/worker-backend with a backend or anything else, and the legacy values v2 would reject
(docs/proposals/v2.md, "converted verbatim"). v2 objects hold a failurePolicy of the v2 schema's shape (enum
values not checked: conversion never looks at them), a workerBackend of its enum, and never the reserved
annotations.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from shared.api import constants as c
from shared.api.v2_spec_annotation import canonical_json
from shared.api.worker_backend import WORKER_BACKEND_ANNOTATION, WORKER_BACKENDS

ANNOTATION = c.V2_SPEC_ANNOTATION
WORDS = st.sampled_from(["", "Launcher", "Worker", "worker", "RestartJob", "FailJob", "Restart", "In", "NotIn",
                         "True", "False", "DisruptionTarget", "main", "None", "All", "Running", "ExitCode",
                         "AtStartup", "waitForWorkersReady", "kueue.x-k8s.io/multikueue", "é", "a:b_c"])
INTS = st.one_of(st.integers(-2, 300), st.integers(-(2**63), 2**63 - 1))
SCALARS = st.one_of(st.none(), st.booleans(), INTS, WORDS)
BACKENDS = st.sampled_from(WORKER_BACKENDS)
# What a stored object's worker-backend annotation may hold: a backend (lifted), or anything else (carried verbatim).
BACKEND_ANNOTATIONS = st.one_of(BACKENDS, BACKENDS, st.sampled_from(["", "indexedjob", "Pods ", "JobSet"]), INTS)
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(WORDS, inner, max_size=3)), max_leaves=6)


def _object(required: dict[str, Any], optional: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(required, optional=optional)


EXIT_CODES = _object({}, {"containerName": WORDS, "operator": WORDS, "values": st.lists(INTS, max_size=4)})
POD_CONDITION = _object({}, {"type": WORDS, "status": WORDS})
RULE = _object({}, {"name": WORDS, "action": WORDS, "onReplicaTypes": st.lists(WORDS, max_size=3),
                    "onPodConditions": st.lists(POD_CONDITION, max_size=3), "onExitCodes": EXIT_CODES})
FAILURE_POLICY = _object({}, {"maxRestarts": INTS, "rules": st.lists(RULE, max_size=3)})

REPLICA_SPEC = _object({}, {"replicas": INTS, "restartPolicy": WORDS,
                            "template": _object({}, {"spec": _object({"containers": st.lists(
                                _object({"name": WORDS}, {"image": WORDS}), max_size=2)}, {})})})
RUN_POLICY = _object({}, {"cleanPodPolicy": WORDS, "backoffLimit": INTS, "suspend": st.booleans(),
                          "managedBy": WORDS, "schedulingPolicy": _object({}, {"minAvailable": INTS, "queue": WORDS})})
SPEC_FIELDS = {
    "slotsPerWorker": INTS, "runLauncherAsWorker": st.booleans(), "sshAuthMountPath": WORDS,
    "launcherCreationPolicy": WORDS, "mpiImplementation": WORDS,
    "mpiReplicaSpecs": st.dictionaries(st.sampled_from(["Launcher", "Worker", "worker"]), REPLICA_SPEC, max_size=3),
}
CONDITION = _object({"type": WORDS, "status": WORDS}, {"reason": WORDS, "message": WORDS,
                                                       "lastTransitionTime": st.just("2025-01-02T03:04:05Z")})
STATUS = _object({}, {"conditions": st.lists(CONDITION, max_size=3), "restartCount": INTS,
                      "readyWorkers": st.just("1/2"), "startTime": st.just("2025-01-02T03:04:05Z")})
ANNOTATION_KEYS = st.sampled_from(["a", "example.com/b", "mpijobs.kubeflow.org/other"])
OTHER_ANNOTATIONS = st.dictionaries(ANNOTATION_KEYS, WORDS, max_size=2)


def _wrapped(policy: Any) -> dict[str, Any]:
    return {"spec": {"runPolicy": {"failurePolicy": policy}}}


def annotation_values() -> st.SearchStrategy[Any]:
    """Every kind of value the annotation can hold: most of them are not liftable."""
    canonical = FAILURE_POLICY.map(lambda p: canonical_json(_wrapped(p)))
    return st.one_of(
        canonical, canonical,
        FAILURE_POLICY.map(lambda p: json.dumps(_wrapped(p), indent=1)),  # not canonical
        FAILURE_POLICY.map(lambda p: canonical_json({"spec": {"runPolicy": {"failurePolicy": p}, "extra": 1}})),
        FAILURE_POLICY.map(lambda p: canonical_json(_wrapped({**p, "restartStrategy": "Recreate"}))),  # unknown
        st.tuples(FAILURE_POLICY, st.sampled_from(["3", 3.5, True, None])).map(
            lambda pv: canonical_json(_wrapped({**pv[0], "maxRestarts": pv[1]}))),  # a wrong type
        st.just(canonical_json(_wrapped(None))),
        JSON_VALUES.map(canonical_json),
        st.sampled_from(["", "{", "not json", "NaN", "[" * 2000 + "]" * 2000, "1" * 5000]),
        JSON_VALUES.filter(lambda v: not isinstance(v, str)),  # not a string at all
    )


def _metadata(annotations: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return _object({"name": st.sampled_from(["pi", "job-1"]), "namespace": st.just("default"),
                    "uid": st.just("6f1b2d0e-0c55-4d4e-9b8e-0c1a2b3c4d5e"), "resourceVersion": st.just("42"),
                    "generation": st.integers(1, 3)},
                   {"labels": st.dictionaries(WORDS, WORDS, max_size=2), "annotations": annotations,
                    "finalizers": st.lists(WORDS, max_size=1)})


@st.composite
def _v2beta1_annotations(draw: st.DrawFn) -> dict[str, Any]:
    annotations: dict[str, Any] = draw(OTHER_ANNOTATIONS)
    if draw(st.booleans()):
        annotations[ANNOTATION] = draw(annotation_values())
    if draw(st.booleans()):
        annotations[WORKER_BACKEND_ANNOTATION] = draw(BACKEND_ANNOTATIONS)
    return annotations


@st.composite
def v2beta1_jobs(draw: st.DrawFn) -> dict[str, Any]:
    """An MPIJob as v2beta1 stores it, often with the annotation."""
    job: dict[str, Any] = {"apiVersion": c.API_VERSION, "kind": c.KIND, "metadata": draw(_metadata(
        _v2beta1_annotations()))}
    spec = draw(_object({}, {**SPEC_FIELDS, "runPolicy": RUN_POLICY}))
    if draw(st.integers(0, 9)):
        job["spec"] = spec
    if draw(st.booleans()):
        job["status"] = draw(STATUS)
    return job


@st.composite
def v2_jobs(draw: st.DrawFn) -> dict[str, Any]:
    """An MPIJob as v2 serves it, often with a failurePolicy, at times a workerBackend; never the reserved
    annotations, never an empty
    annotations map (the API server drops empty metadata maps)."""
    job: dict[str, Any] = {"apiVersion": c.API_VERSION_V2, "kind": c.KIND,
                           "metadata": draw(_metadata(st.dictionaries(ANNOTATION_KEYS, WORDS, min_size=1,
                                                                                      max_size=2)))}
    run_policy = draw(RUN_POLICY)
    if draw(st.integers(0, 3)):
        run_policy["failurePolicy"] = draw(FAILURE_POLICY)
    spec = draw(_object({}, {**SPEC_FIELDS, "workerBackend": BACKENDS}))
    if draw(st.integers(0, 9)):
        job["spec"] = {**spec, "runPolicy": run_policy} if draw(st.integers(0, 5)) else spec
    if draw(st.booleans()):
        job["status"] = draw(STATUS)
    return job
