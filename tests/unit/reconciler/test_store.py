"""A Store indexed by a label selects exactly what the unindexed Store selects, after any puts and deletes."""

from __future__ import annotations

import random

from reconciler.runtime.store import PackedStore, Store
from shared.jsondict import JSONDict

JOB = "training.kubeflow.org/job-name"
ROLE = "training.kubeflow.org/job-role"


def pod(name: str, namespace: str = "ns", **labels: str) -> JSONDict:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}, "status": {"phase": "Running"}}


def names(objects: list[JSONDict]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects)


def test_select_by_the_index_label_sees_only_that_value() -> None:
    store = Store(index_labels=(JOB,))
    for i in range(3):
        store.put(pod(f"a-{i}", **{JOB: "a", ROLE: "worker"}))
        store.put(pod(f"b-{i}", **{JOB: "b", ROLE: "worker"}))
    store.put(pod("a-launcher", **{JOB: "a", ROLE: "launcher"}))
    store.put(pod("a-elsewhere", "other", **{JOB: "a", ROLE: "worker"}))
    assert names(store.select("ns", {JOB: "a", ROLE: "worker"})) == ["a-0", "a-1", "a-2"]
    assert names(store.select("ns", {JOB: "a"})) == ["a-0", "a-1", "a-2", "a-launcher"]
    assert names(store.select("ns", {JOB: "c"})) == []
    assert names(store.select("ns", {ROLE: "launcher"})) == ["a-launcher"]  # not the index label: a scan
    assert names(store.select("other", {JOB: "a"})) == ["a-elsewhere"]


def test_a_relabelled_or_deleted_object_leaves_its_old_group() -> None:
    store = Store(index_labels=(JOB,))
    store.put(pod("p", **{JOB: "a"}))
    assert store.put(pod("p", **{JOB: "b"})) == pod("p", **{JOB: "a"})
    assert names(store.select("ns", {JOB: "a"})) == []
    assert names(store.select("ns", {JOB: "b"})) == ["p"]
    store.put(pod("p"))  # the label removed
    assert names(store.select("ns", {JOB: "b"})) == []
    assert names(store.select("ns")) == ["p"]
    store.put(pod("q", **{JOB: "b"}))
    assert store.delete("ns", "q") == pod("q", **{JOB: "b"})
    assert store.select("ns", {JOB: "b"}) == []
    assert store._indexed == {}


def test_an_index_of_two_labels_needs_both() -> None:
    store = Store(index_labels=(JOB, ROLE))
    store.put(pod("w", **{JOB: "a", ROLE: "worker"}))
    store.put(pod("l", **{JOB: "a", ROLE: "launcher"}))
    store.put(pod("x", **{JOB: "a"}))  # no role: not indexed, still selected by a scan
    assert names(store.select("ns", {JOB: "a", ROLE: "worker"})) == ["w"]
    assert names(store.select("ns", {JOB: "a", ROLE: "launcher"})) == ["l"]
    assert names(store.select("ns", {JOB: "a"})) == ["l", "w", "x"]
    assert names(store.select("ns", {JOB: "a", ROLE: "worker", "extra": "1"})) == []
    store.put(pod("w", **{JOB: "a", ROLE: "worker", "extra": "1"}))
    assert names(store.select("ns", {JOB: "a", ROLE: "worker", "extra": "1"})) == ["w"]


def test_replace_rebuilds_the_index() -> None:
    store = Store(index_labels=(JOB,))
    store.put(pod("old", **{JOB: "a"}))
    gone = store.replace([pod("new", **{JOB: "a"}), pod("other", **{JOB: "b"})])
    assert names(gone) == ["old"]
    assert names(store.select("ns", {JOB: "a"})) == ["new"]
    assert names(store.select("ns", {JOB: "b"})) == ["other"]


def test_indexed_and_plain_stores_agree_after_random_changes() -> None:
    rng = random.Random(9)
    stores = [Store(), Store(index_labels=(JOB,)), PackedStore(index_labels=(JOB,))]
    for _ in range(2000):
        name, namespace = f"p{rng.randrange(40)}", rng.choice(["ns", "other"])
        if rng.random() < 0.3:
            results = [store.delete(namespace, name) for store in stores]
        else:
            labels = {JOB: rng.choice("abc"), ROLE: rng.choice(["worker", "launcher"])}
            if rng.random() < 0.1:
                del labels[rng.choice([JOB, ROLE])]
            if rng.random() < 0.2:
                labels["x"] = "1"
            results = [store.put(pod(name, namespace, **labels)) for store in stores]
        assert results[1] == results[0]
        assert results[2] == results[0]
        selector = rng.choice([{JOB: "a"}, {JOB: "b", ROLE: "worker"}, {JOB: "c", ROLE: "launcher", "x": "1"},
                               {ROLE: "launcher"}, {}])
        ns = rng.choice(["ns", "other"])
        expected = names(stores[0].select(ns, selector))
        assert names(stores[1].select(ns, selector)) == expected
        assert names(stores[2].select(ns, selector)) == expected
    assert len(stores[1]) == len(stores[0])


def test_a_replaced_object_keeps_the_name_string_its_key_holds() -> None:
    """The bucket's key is the name from an object's first put (a dict keeps the key it has); later versions hold
    that same string instead of a copy of it, so a cached pod's name is in memory once."""
    store = Store(index_labels=(JOB,))
    first, later = "".join(["worker", "-0"]), "".join(["worker", "-", "0"])  # equal strings, two objects
    assert first == later
    assert first is not later
    store.put(pod(first, **{JOB: "a"}))
    replacement = pod(later, **{JOB: "a"})
    store.put(replacement)
    cached = store.get("ns", "worker-0")
    assert cached == replacement
    assert cached["metadata"]["name"] is first
