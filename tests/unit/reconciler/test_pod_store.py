"""The pod cache keeps each slim pod as one tuple and gives back exactly what was put in."""

from __future__ import annotations

import sys

from reconciler.mpijob.caches import SlimPodStore, slim_pod
from shared.api import constants as c
from shared.jsondict import JSONDict
from tests.unit.reconciler.test_sharing import RUNNING, slim, worker


def test_a_slim_pod_reads_back_equal_with_its_keys_in_order() -> None:
    store = SlimPodStore()
    pod = slim(3, RUNNING)
    assert store.put(pod) is None
    found = store.get("default", "pi-worker-3")
    assert found == pod
    assert list(found or {}) == list(pod)
    assert list((found or {})["metadata"]) == list(pod["metadata"])
    assert (found or {})["status"] is pod["status"]  # the shared status stays shared


def test_a_terminating_pod_keeps_its_deletion_timestamp() -> None:
    store = SlimPodStore()
    raw = worker(0, RUNNING)
    raw["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    pod = slim_pod(raw)
    assert pod is not None
    store.put(pod)
    assert store.get("default", "pi-worker-0") == pod
    assert list((store.get("default", "pi-worker-0") or {})["metadata"]) == list(pod["metadata"])


def test_put_returns_what_it_replaced_and_delete_what_it_removed() -> None:
    store = SlimPodStore()
    first, second = slim(0, {"phase": "Pending"}), slim(0, RUNNING)
    store.put(first)
    assert store.put(second) == first
    assert store.delete("default", "pi-worker-0") == second
    assert store.get("default", "pi-worker-0") is None
    assert len(store) == 0


def test_select_matches_labels_without_rebuilding_the_others() -> None:
    store = SlimPodStore()
    pods = [slim(i, RUNNING) for i in range(3)] + [slim(0, RUNNING, job="other", uid="uid-2")]
    for pod in pods:
        store.put(pod)
    selector = {c.LABEL_JOB_NAME: "pi", c.LABEL_JOB_ROLE: c.ROLE_WORKER}
    assert sorted(p["metadata"]["name"] for p in store.select("default", selector)) == [
        "pi-worker-0", "pi-worker-1", "pi-worker-2"]
    assert store.select("default", {c.LABEL_JOB_NAME: "nope"}) == []
    assert sorted(p["metadata"]["name"] for p in store.select("default")) == [
        "other-worker-0", "pi-worker-0", "pi-worker-1", "pi-worker-2"]
    assert store.select("elsewhere") == []
    assert sorted(store, key=lambda p: p["metadata"]["name"]) == sorted(pods, key=lambda p: p["metadata"]["name"])


def test_anything_but_a_slim_pod_is_kept_as_it_is() -> None:
    store = SlimPodStore()
    odd: JSONDict = {"kind": "Pod", "metadata": {"name": "x", "namespace": "default", "annotations": {"a": "b"}},
                     "status": {}}
    unlabelled: JSONDict = {"metadata": {"name": "y", "namespace": "default"}}
    store.put(odd)
    store.put(unlabelled)
    assert store.get("default", "x") is odd
    assert store.get("default", "y") is unlabelled
    assert [p["metadata"]["name"] for p in store.select("default", {"a": "b"})] == []
    assert sorted(p["metadata"]["name"] for p in store.select("default")) == ["x", "y"]


def test_a_packed_pod_takes_less_than_its_two_dicts() -> None:
    store = SlimPodStore()
    pod = slim(5, RUNNING)
    store.put(pod)
    packed = store._items["default"]["pi-worker-5"]
    assert type(packed) is tuple
    dicts = sys.getsizeof(pod) + sys.getsizeof(pod["metadata"])
    assert sys.getsizeof(packed) <= dicts - 300
