"""An informer's cache: slim objects by namespace and name. Never mutate what it returns."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from shared.jsondict import JSONDict


class Store:
    """``index_labels``: objects that have all these labels are also kept by namespace and those labels' values,
    so that a ``select`` naming them all looks only at the objects with the same values instead of the whole
    namespace (the workers of one job among all the pods of a namespace)."""

    def __init__(self, index_labels: tuple[str, ...] = ()) -> None:
        self._items: dict[str, dict[str, Any]] = {}  # what _pack made of each object
        self._index_labels = index_labels
        self._indexed: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}  # (namespace, values): name: packed

    def _pack(self, obj: JSONDict) -> Any:
        return obj

    def _unpack(self, packed: Any) -> JSONDict:
        unpacked: JSONDict = packed
        return unpacked

    def get(self, namespace: str, name: str) -> JSONDict | None:
        packed = self._items.get(namespace, {}).get(name)
        return None if packed is None else self._unpack(packed)

    def has(self, namespace: str, name: str) -> bool:
        return name in self._items.get(namespace, {})

    def put(self, obj: JSONDict) -> JSONDict | None:
        """Store ``obj``; return what it replaced."""
        metadata = obj["metadata"]
        namespace, name = metadata.get("namespace", ""), metadata["name"]
        bucket = self._items.setdefault(namespace, {})
        old = bucket.get(name)
        old_obj = None if old is None else self._unpack(old)
        if old_obj is old and old_obj is not None:  # kept as given: hold one string of the name, the bucket's key
            metadata["name"] = old_obj["metadata"]["name"]
        packed = bucket[name] = self._pack(obj)
        if self._index_labels:
            if old_obj is not None:
                self._unindex(namespace, name, old_obj)
            key = self._index_key(metadata.get("labels") or {})
            if key is not None:
                self._indexed.setdefault((namespace, key), {})[name] = packed
        return old_obj

    def delete(self, namespace: str, name: str) -> JSONDict | None:
        bucket = self._items.get(namespace, {})
        old = bucket.pop(name, None)
        if not bucket:
            self._items.pop(namespace, None)
        if old is None:
            return None
        old_obj = self._unpack(old)
        if self._index_labels:
            self._unindex(namespace, name, old_obj)
        return old_obj

    def _index_key(self, labels: dict[str, str]) -> tuple[str, ...] | None:
        """The values of the index labels, or None when one is missing (such objects are not indexed)."""
        if not all(label in labels for label in self._index_labels):
            return None
        return tuple(labels[label] for label in self._index_labels)

    def _unindex(self, namespace: str, name: str, obj: JSONDict) -> None:
        key = self._index_key(obj["metadata"].get("labels") or {})
        if key is None:
            return  # such objects are not indexed
        group = self._indexed.get((namespace, key))
        if group is None:
            return
        group.pop(name, None)
        if not group:
            del self._indexed[namespace, key]

    def select(self, namespace: str, labels: dict[str, str] | None = None) -> list[JSONDict]:
        """Objects of a namespace whose labels include every ``labels`` pair."""
        wanted = labels or {}
        key = self._index_key(wanted) if self._index_labels else None
        if key is None:
            candidates = self._items.get(namespace, {}).values()
        else:
            candidates = self._indexed.get((namespace, key), {}).values()
            if len(wanted) == len(key):  # the index labels are all that is asked: every candidate has them
                return list(map(self._unpack, candidates))
        pairs = wanted.items()
        return [obj for obj in map(self._unpack, candidates)
                if pairs <= ((obj["metadata"].get("labels") or {}).items())]

    def __iter__(self) -> Iterator[JSONDict]:
        for bucket in self._items.values():
            yield from map(self._unpack, bucket.values())

    def __len__(self) -> int:
        return sum(len(bucket) for bucket in self._items.values())

    def replace(self, objects: list[JSONDict]) -> list[JSONDict]:
        """Replace everything (a relist); return the objects that disappeared."""
        old = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in self}
        self._items, self._indexed = {}, {}
        for obj in objects:
            self.put(obj)
            old.pop((obj["metadata"].get("namespace", ""), obj["metadata"]["name"]), None)
        return list(old.values())


class PackedStore(Store):
    """A Store that keeps each object as its JSON encoding and decodes it on every read, which returns a fresh
    dict: the bytes take about a fifth of the decoded dict's memory. For objects read about once per sync,
    such as MPIJobs with their pod templates."""

    def _pack(self, obj: JSONDict) -> Any:
        return bytes(memoryview(orjson.dumps(obj)))  # a copy of the exact size: orjson's own keeps >= 4 KiB

    def _unpack(self, packed: Any) -> JSONDict:
        unpacked: JSONDict = orjson.loads(packed)
        return unpacked
