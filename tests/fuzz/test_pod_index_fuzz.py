"""Fuzz the IndexedJob backend's pod webhook (webhook/pod_index.py) with worker pods whose index label, index
annotation and offset annotation hold anything.

Properties: it never raises and never denies; a patch applies, gives the pod the rank label
``str(index + offset)`` of ``pod_replica_index`` and nothing else, and a second call on the patched pod has nothing to
add; a pod left unchanged says why, exactly when it has no valid index.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

import jsonpatch
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.api import constants as c
from shared.api.worker_backend import (
    JOB_COMPLETION_INDEX,
    REPLICA_INDEX_OFFSET_ANNOTATION,
    WORKER_JOB_LABEL,
    pod_replica_index,
)
from tests.fuzz.figures import BUDGETS, fuzz_settings, measured
from tests.fuzz.strategies import json_values
from webhook.pod_index import mutate_pod

INDEXES = st.one_of(st.integers(0, 2**31 + 1).map(str), st.sampled_from(["", "-1", "01", "1e3", " 3", "٣", "0x1"]),
                    st.text(max_size=12), json_values(2))
KEYS = st.sampled_from([JOB_COMPLETION_INDEX, REPLICA_INDEX_OFFSET_ANNOTATION, c.LABEL_REPLICA_INDEX, "a"])


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    metadata: dict[str, Any] = {"generateName": "pi-worker-1-"}
    for field in ("labels", "annotations"):
        if draw(st.integers(0, 4)):
            metadata[field] = draw(st.dictionaries(KEYS, INDEXES, max_size=3))
    if "labels" in metadata and draw(st.booleans()):
        metadata["labels"][WORKER_JOB_LABEL] = "pi"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}


@pytest.mark.parametrize("examples", BUDGETS)
def test_pod_webhook_never_fails_and_patches_only_the_rank(examples: int) -> None:
    with measured("pod webhook: worker pods with any index and offset") as counter:

        @fuzz_settings(examples)
        @given(pod=pods())
        def run(pod: dict[str, Any]) -> None:
            counter.examples += 1
            original = copy.deepcopy(pod)
            answer = mutate_pod({"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                                 "operation": "CREATE", "object": pod})
            assert pod == original
            assert answer.response["allowed"] is True
            index, problem = pod_replica_index(pod)
            assert (index is None) == bool(problem)
            if "patch" not in answer.response:
                assert answer.skipped == problem
                assert index is None or (pod["metadata"].get("labels") or {}).get(c.LABEL_REPLICA_INDEX) == str(index)
                counter.count("unchanged")
                return
            patch = orjson.loads(base64.b64decode(answer.response["patch"]))
            patched = jsonpatch.apply_patch(pod, patch)
            labels = {k: v for k, v in (pod["metadata"].get("labels") or {}).items() if k != c.LABEL_REPLICA_INDEX}
            assert patched["metadata"]["labels"] == {**labels, c.LABEL_REPLICA_INDEX: str(index)}
            assert {k: v for k, v in patched["metadata"].items() if k != "labels"} == {
                k: v for k, v in pod["metadata"].items() if k != "labels"}
            again = mutate_pod({"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                                "operation": "CREATE", "object": patched})
            assert "patch" not in again.response
            counter.count("patched")

        run()
    assert counter.examples >= examples
