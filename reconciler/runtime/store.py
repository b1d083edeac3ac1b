"""An informer's cache: slim objects by namespace and name. Never mutate what it returns."""

from __future__ import annotations

from collections.abc import Iterator

from shared.jsondict import JSONDict


class Store:
    def __init__(self) -> None:
        self._items: dict[str, dict[str, JSONDict]] = {}

    def get(self, namespace: str, name: str) -> JSONDict | None:
        return self._items.get(namespace, {}).get(name)

    def put(self, obj: JSONDict) -> JSONDict | None:
        """Store ``obj``; return what it replaced."""
        metadata = obj["metadata"]
        bucket = self._items.setdefault(metadata.get("namespace", ""), {})
        old = bucket.get(metadata["name"])
        bucket[metadata["name"]] = obj
        return old

    def delete(self, namespace: str, name: str) -> JSONDict | None:
        bucket = self._items.get(namespace, {})
        old = bucket.pop(name, None)
        if not bucket:
            self._items.pop(namespace, None)
        return old

    def select(self, namespace: str, labels: dict[str, str] | None = None) -> list[JSONDict]:
        """Objects of a namespace whose labels include every ``labels`` pair."""
        wanted = (labels or {}).items()
        return [obj for obj in self._items.get(namespace, {}).values()
                if wanted <= ((obj["metadata"].get("labels") or {}).items())]

    def __iter__(self) -> Iterator[JSONDict]:
        for bucket in self._items.values():
            yield from bucket.values()

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
