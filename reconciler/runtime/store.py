"""An informer's cache: slim objects by namespace and name. Never mutate what it returns."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from shared.jsondict import JSONDict


class Store:
    def __init__(self) -> None:
        self._items: dict[str, dict[str, Any]] = {}  # what _pack made of each object

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
        bucket = self._items.setdefault(metadata.get("namespace", ""), {})
        old = bucket.get(metadata["name"])
        bucket[metadata["name"]] = self._pack(obj)
        return None if old is None else self._unpack(old)

    def delete(self, namespace: str, name: str) -> JSONDict | None:
        bucket = self._items.get(namespace, {})
        old = bucket.pop(name, None)
        if not bucket:
            self._items.pop(namespace, None)
        return None if old is None else self._unpack(old)

    def select(self, namespace: str, labels: dict[str, str] | None = None) -> list[JSONDict]:
        """Objects of a namespace whose labels include every ``labels`` pair."""
        wanted = (labels or {}).items()
        return [obj for obj in map(self._unpack, self._items.get(namespace, {}).values())
                if wanted <= ((obj["metadata"].get("labels") or {}).items())]

    def __iter__(self) -> Iterator[JSONDict]:
        for bucket in self._items.values():
            yield from map(self._unpack, bucket.values())

    def __len__(self) -> int:
        return sum(len(bucket) for bucket in self._items.values())

    def replace(self, objects: list[JSONDict]) -> list[JSONDict]:
        """Replace everything (a relist); return the objects that disappeared."""
        old = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in self}
        self._items = {}
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
