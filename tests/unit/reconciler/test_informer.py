"""The informer against a small fake of our own KubeClient seam: list, watch, 410 relist, slimming."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from reconciler.runtime.api_resources import PODS
from reconciler.runtime.client import ApiError
from reconciler.runtime.informer import FatalWatchError, Informer
from reconciler.runtime.store import PackedStore, Store

JSON = dict[str, Any]


def pod(name: str, rv: str, phase: str = "Running", *, ours: bool = True) -> JSON:
    labels = {"training.kubeflow.org/operator-name": "mpi-operator"} if ours else {}
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "labels": labels},
            "status": {"phase": phase}, "spec": {"containers": [{"name": "c", "image": "big" * 100}]}}


class FakeKube:
    """Serves scripted list pages and watch streams; an exception in a stream is raised there."""

    def __init__(self, lists: list[JSON], watches: list[list[Any]]) -> None:
        self.lists, self.watches = lists, watches
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.done = asyncio.Event()

    async def request(self, method: str, path: str, body: Any = None, *, params: dict[str, str] | None = None,
                      content_type: str = "application/json") -> JSON:
        self.requests.append(("list", dict(params or {})))
        return self.lists.pop(0)

    async def watch(self, path: str, params: dict[str, str]) -> AsyncIterator[JSON]:
        self.requests.append(("watch", dict(params)))
        if not self.watches:
            self.done.set()
            await asyncio.Event().wait()
        for item in self.watches.pop(0):
            if isinstance(item, BaseException):
                raise item
            yield item


def slim(obj: JSON) -> JSON | None:
    if "training.kubeflow.org/operator-name" not in obj["metadata"].get("labels", {}):
        return None
    return {"metadata": obj["metadata"], "status": obj["status"]}


STORES = pytest.mark.parametrize("store", [Store, PackedStore], ids=["dicts", "packed"])


async def run(fake: FakeKube, store: type[Store] = Store) -> tuple[Informer, list[tuple[str | None, str | None]]]:
    changes: list[tuple[str | None, str | None]] = []

    def on_change(old: JSON | None, new: JSON | None) -> None:
        changes.append((old["metadata"]["resourceVersion"] if old else None,
                        new["metadata"]["resourceVersion"] if new else None))

    informer = Informer(fake, PODS, slim=slim, on_change=on_change, label_selector="a=b",  # type: ignore[arg-type]
                        store=store())
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(fake.done.wait(), 5)
    task.cancel()
    return informer, changes


@STORES
async def test_list_then_watch_keeps_a_slim_store(store: type[Store]) -> None:
    fake = FakeKube(
        lists=[{"metadata": {"resourceVersion": "10"}, "items": [pod("a", "5"), pod("x", "6", ours=False)]}],
        watches=[[{"type": "ADDED", "object": pod("b", "11")}, {"type": "MODIFIED", "object": pod("a", "12", "Failed")},
                  {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "13"}}},
                  {"type": "DELETED", "object": pod("b", "14")}]])
    informer, changes = await run(fake, store)
    assert changes == [(None, "5"), (None, "11"), ("5", "12"), ("11", None)]
    assert list(informer.store) == [{"metadata": pod("a", "12")["metadata"], "status": {"phase": "Failed"}}]
    assert fake.requests[0] == ("list", {"labelSelector": "a=b", "limit": "100"})
    assert fake.requests[1][1]["resourceVersion"] == "10"
    assert fake.requests[2][1]["resourceVersion"] == "14", "the next watch resumes where the last one ended"


@STORES
async def test_gone_relists_and_reports_what_disappeared(store: type[Store]) -> None:
    fake = FakeKube(
        lists=[{"metadata": {"resourceVersion": "10"}, "items": [pod("a", "5"), pod("b", "6")]},
               {"metadata": {"resourceVersion": "30"}, "items": [pod("a", "5"), pod("c", "29")]}],
        watches=[[ApiError(410, "Expired", "too old resource version")]])
    informer, changes = await run(fake, store)
    assert changes == [(None, "5"), (None, "6"), (None, "29"), ("6", None)]
    assert sorted(p["metadata"]["name"] for p in informer.store) == ["a", "c"]
    assert [kind for kind, _ in fake.requests] == ["list", "watch", "list", "watch"]


def test_a_packed_store_returns_fresh_equal_dicts() -> None:
    store = PackedStore()
    job = {"metadata": {"name": "pi", "namespace": "ns", "labels": {"a": "b"}}, "spec": {"n": [1, 2.5, None, "x"]}}
    assert store.put(job) is None
    first, second = store.get("ns", "pi"), store.get("ns", "pi")
    assert first == second == job
    assert first is not second
    assert store.has("ns", "pi")
    assert not store.has("ns", "other")
    assert not store.has("other", "pi")
    assert store.select("ns", {"a": "b"}) == [job]
    assert store.select("ns", {"a": "c"}) == []
    assert store.put({**job, "spec": {}}) == job
    assert store.delete("ns", "pi") == {**job, "spec": {}}
    assert store.get("ns", "pi") is None
    assert len(store) == 0


async def test_an_error_event_with_410_relists() -> None:
    fake = FakeKube(
        lists=[{"metadata": {"resourceVersion": "1"}, "items": []},
               {"metadata": {"resourceVersion": "2"}, "items": [pod("a", "2")]}],
        watches=[[{"type": "ERROR", "object": {"code": 410, "reason": "Expired", "message": "gone"}}]])
    informer, _ = await run(fake)
    assert [p["metadata"]["name"] for p in informer.store] == ["a"]


async def test_a_dropped_connection_resumes_the_watch() -> None:
    fake = FakeKube(lists=[{"metadata": {"resourceVersion": "1"}, "items": []}],
                    watches=[[{"type": "ADDED", "object": pod("a", "3")}, ConnectionResetError("reset")]])
    informer, _ = await run(fake)
    assert [kind for kind, _ in fake.requests] == ["list", "watch", "watch"]
    assert fake.requests[2][1]["resourceVersion"] == "3"
    assert [p["metadata"]["name"] for p in informer.store] == ["a"]


async def test_forbidden_is_fatal() -> None:
    fake = FakeKube(lists=[{"metadata": {"resourceVersion": "1"}, "items": []}],
                    watches=[[ApiError(403, "Forbidden", "pods is forbidden")]])
    informer = Informer(fake, PODS, slim=slim, on_change=lambda o, n: None)  # type: ignore[arg-type]
    with pytest.raises(FatalWatchError, match="pods is forbidden"):
        await asyncio.wait_for(informer.run(), 5)
