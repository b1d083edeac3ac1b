"""PriorityClass values for the PodGroup's minResources, read at most once per name per ``ttl`` seconds.

Upstream reads them from an informer; a short-lived map keeps the reconciler's RBAC at ``get`` and still
spares a GET per sync: a steady job costs no request. A changed or new PriorityClass is seen within ``ttl``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from reconciler.mpijob.cluster import Cluster
from reconciler.runtime.api_resources import PRIORITY_CLASSES
from reconciler.runtime.client import ApiError

DEFAULT_TTL = 30.0


@dataclass
class PriorityClassCache:
    """Name -> (time read, value or None when the class does not exist)."""

    ttl: float = DEFAULT_TTL
    clock: Callable[[], float] = time.monotonic
    _read: dict[str, tuple[float, int | None]] = field(default_factory=dict)

    async def values(self, cluster: Cluster, names: Iterable[str]) -> dict[str, int | None]:
        """The value of each named class (None for a missing one), read from the API when not fresh."""
        return {name: await self._value(cluster, name) for name in dict.fromkeys(names)}

    async def _value(self, cluster: Cluster, name: str) -> int | None:
        now = self.clock()
        cached = self._read.get(name)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        try:
            value: int | None = int((await cluster.get(PRIORITY_CLASSES, "", name)).get("value", 0))
        except ApiError as error:
            if not error.not_found:
                raise
            value = None
        self._read[name] = (now, value)
        return value
