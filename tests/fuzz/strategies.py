"""Hypothesis strategies for MPIJobs and AdmissionReviews: generated from the schema's vocabulary, and
mutated from valid seeds (a field deleted, retyped, replaced by an arbitrary JSON value, a key added)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

JSON = Any

# Values the webhook can receive: orjson decodes integers beyond 64 bits as floats and rejects NaN and
# infinities, so the generated JSON stays inside what the API server (and orjson) can carry.
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
SMALL_INTS = st.integers(min_value=-3, max_value=6)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
WORDS = st.sampled_from([
    "", "Launcher", "Worker", "launcher", "worker", "Workers", " Worker", "OpenMPI", "Intel", "MPICH", "mpich",
    "None", "All", "Running", "Sometimes", "OnFailure", "Never", "Always", "ExitCode", "AtStartup",
    "WaitForWorkersReady", "Later", "kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue", "/root/.ssh",
    "/home/mpiuser/.ssh", "pi", "a" * 64, "1-pi", "pi.example", "PI", "nvidia.com/gpu",
])
SCALARS = st.one_of(st.none(), st.booleans(), SMALL_INTS, INT64, FLOATS, TEXT, WORDS)


def json_values(max_leaves: int = 12) -> st.SearchStrategy[JSON]:
    """Arbitrary JSON: scalars, lists and objects nested a few levels."""
    return st.recursive(
        SCALARS,
        lambda children: st.one_of(st.lists(children, max_size=4),
                                   st.dictionaries(st.one_of(WORDS, TEXT), children, max_size=4)),
        max_leaves=max_leaves,
    )


def _maybe(strategy: st.SearchStrategy[JSON]) -> st.SearchStrategy[JSON]:
    """Usually the field's own kind of value, sometimes anything at all."""
    return st.one_of(strategy, strategy, strategy, json_values(4))


CONTAINER = st.fixed_dictionaries(
    {"name": _maybe(st.sampled_from(["main", "c", ""])), "image": _maybe(st.just("mpi-image"))},
    optional={
        "resources": _maybe(st.fixed_dictionaries({}, optional={
            "limits": _maybe(st.dictionaries(WORDS, _maybe(st.sampled_from(["1", "2", 8, "x", "500m"])),
                                             max_size=2)),
            "requests": _maybe(st.dictionaries(WORDS, _maybe(SMALL_INTS), max_size=2)),
        })),
        "securityContext": _maybe(st.fixed_dictionaries({}, optional={
            "runAsUser": _maybe(st.sampled_from([0, 1000])), "runAsNonRoot": _maybe(st.booleans())})),
        "env": _maybe(st.lists(st.fixed_dictionaries({"name": TEXT, "value": TEXT}), max_size=3)),
    },
)
TEMPLATE = st.fixed_dictionaries({}, optional={
    "metadata": _maybe(st.fixed_dictionaries({}, optional={"labels": st.dictionaries(WORDS, WORDS, max_size=2)})),
    "spec": _maybe(st.fixed_dictionaries({}, optional={
        "containers": _maybe(st.lists(_maybe(CONTAINER), max_size=3)),
        "restartPolicy": _maybe(WORDS),
        "securityContext": _maybe(st.fixed_dictionaries({}, optional={"runAsUser": _maybe(SMALL_INTS)})),
    })),
})
REPLICA = st.fixed_dictionaries({}, optional={
    "replicas": _maybe(st.one_of(SMALL_INTS, INT64)), "restartPolicy": _maybe(WORDS), "template": _maybe(TEMPLATE),
})
RUN_POLICY = st.fixed_dictionaries({}, optional={
    "cleanPodPolicy": _maybe(WORDS), "ttlSecondsAfterFinished": _maybe(SMALL_INTS),
    "activeDeadlineSeconds": _maybe(SMALL_INTS), "backoffLimit": _maybe(SMALL_INTS), "suspend": _maybe(st.booleans()),
    "managedBy": _maybe(WORDS),
    "schedulingPolicy": _maybe(st.fixed_dictionaries({}, optional={
        "minAvailable": _maybe(SMALL_INTS), "queue": _maybe(WORDS), "priorityClass": _maybe(WORDS),
        "minResources": _maybe(st.dictionaries(WORDS, _maybe(st.one_of(SMALL_INTS, WORDS)), max_size=2)),
        "scheduleTimeoutSeconds": _maybe(SMALL_INTS)})),
})
SPEC = st.fixed_dictionaries({}, optional={
    "slotsPerWorker": _maybe(SMALL_INTS), "runLauncherAsWorker": _maybe(st.booleans()),
    "sshAuthMountPath": _maybe(WORDS), "launcherCreationPolicy": _maybe(WORDS), "mpiImplementation": _maybe(WORDS),
    "runPolicy": _maybe(RUN_POLICY),
    "mpiReplicaSpecs": _maybe(st.dictionaries(WORDS, _maybe(REPLICA), max_size=3)),
})
METADATA = st.fixed_dictionaries({}, optional={
    "name": _maybe(WORDS), "namespace": _maybe(WORDS), "generateName": _maybe(WORDS),
    "labels": _maybe(st.dictionaries(WORDS, WORDS, max_size=2)),
    "deletionTimestamp": _maybe(st.just("2026-01-01T00:00:00Z")),
})
GENERATED_MPIJOBS: st.SearchStrategy[JSON] = st.fixed_dictionaries(
    {"apiVersion": _maybe(st.just("kubeflow.org/v2beta1")), "kind": _maybe(st.just("MPIJob"))},
    optional={"metadata": _maybe(METADATA), "spec": _maybe(SPEC), "status": json_values(6)},
)


def valid_seed(workers: int = 2) -> dict[str, Any]:
    """A complete, valid MPIJob: the starting point of mutations."""
    container = {"name": "main", "image": "mpi-image", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    template = {"spec": {"containers": [container]}}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "pi", "namespace": "default"},
            "spec": {"slotsPerWorker": 1, "runLauncherAsWorker": False, "sshAuthMountPath": "/root/.ssh",
                     "launcherCreationPolicy": "AtStartup", "mpiImplementation": "OpenMPI",
                     "runPolicy": {"cleanPodPolicy": "None", "suspend": False, "backoffLimit": 6},
                     "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "restartPolicy": "OnFailure",
                                                      "template": copy.deepcopy(template)},
                                         "Worker": {"replicas": workers, "restartPolicy": "Never",
                                                    "template": copy.deepcopy(template)}}}}


def _containers(obj: JSON) -> list[tuple[Any, Any]]:
    """Every (container, key) slot of obj, depth first: the places a mutation can hit."""
    slots: list[tuple[Any, Any]] = []
    stack = [obj]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in items:
            slots.append((node, key))
            stack.append(child)
    return slots


@st.composite
def mutated(draw: st.DrawFn, seed: JSON, max_mutations: int = 4) -> JSON:
    """``seed`` with a few random edits: a value replaced, a key deleted or added, a list emptied."""
    obj = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, max_mutations))):
        slots = _containers(obj)
        if not slots:
            break
        parent, key = draw(st.sampled_from(slots))
        action = draw(st.sampled_from(["replace", "replace", "delete", "add", "null", "wrap"]))
        if action == "replace":
            parent[key] = draw(json_values(6))
        elif action == "null":
            parent[key] = None
        elif action == "wrap":
            parent[key] = [parent[key]] if draw(st.booleans()) else {"value": parent[key]}
        elif action == "delete":
            del parent[key]
        elif isinstance(parent, dict):
            parent[draw(st.one_of(WORDS, TEXT))] = draw(json_values(4))
        else:
            parent.insert(draw(st.integers(0, len(parent))), draw(json_values(4)))
    return obj


MPIJOBS: st.SearchStrategy[JSON] = st.one_of(
    GENERATED_MPIJOBS,
    mutated(valid_seed()),
    st.builds(valid_seed, st.integers(1, 5)),
    st.integers(1, 100).flatmap(lambda n: mutated(valid_seed(n))),
)

MPIJOB_KIND = {"group": "kubeflow.org", "version": "v2beta1", "kind": "MPIJob"}
MPIJOB_V2_KIND = {"group": "kubeflow.org", "version": "v2", "kind": "MPIJob"}
REVIEW_KINDS = st.one_of(st.just(MPIJOB_KIND), st.just(MPIJOB_V2_KIND),
                         st.just({"group": "", "version": "v1", "kind": "Pod"}), json_values(3))


def _one_in(draw: st.DrawFn, n: int) -> bool:
    """True about once in n draws (hypothesis favours small integers, so the rare case is the last)."""
    return draw(st.sampled_from(range(n))) == n - 1


@st.composite
def reviews(draw: st.DrawFn) -> JSON:
    """AdmissionReviews: mostly well formed around a generated or mutated MPIJob, some mutated themselves."""
    operation = draw(st.sampled_from(["CREATE", "UPDATE", "CREATE", "UPDATE", "DELETE", "CONNECT"]))
    request: dict[str, Any] = {
        "uid": str(draw(st.uuids())),
        "kind": draw(REVIEW_KINDS) if _one_in(draw, 10) else MPIJOB_KIND,
        "operation": operation,
        "namespace": "default",
        "object": draw(MPIJOBS),
        "dryRun": draw(st.booleans()),
    }
    if operation == "UPDATE" or _one_in(draw, 4):
        request["oldObject"] = draw(MPIJOBS)
    if _one_in(draw, 10):
        request["subResource"] = draw(st.one_of(st.just("status"), json_values(2)))
    review: JSON = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    if _one_in(draw, 8):
        review = draw(mutated(review, max_mutations=2))
    return review
