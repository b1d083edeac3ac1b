"""One copy of the small JSON values that many cached objects hold alike, freed with its last holder.

The workers of a job have the same selected labels, the same controller reference and, most of the time,
the same status (Running and Ready): kept once per distinct value instead of once per pod, a slim pod
costs about half as much. Cached objects are never mutated (``store.py``), which is what makes sharing
their parts safe.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar


class SharedDict(dict[str, Any]):
    """A plain dict that a weak reference can point to (a dict cannot)."""

    __slots__ = ("__weakref__",)


class SharedList(list[Any]):
    """A plain list that a weak reference can point to (a list cannot)."""

    __slots__ = ("__weakref__",)


Shared = TypeVar("Shared", SharedDict, SharedList)
_VALUES: weakref.WeakValueDictionary[Hashable, SharedDict | SharedList] = weakref.WeakValueDictionary()


def shared(key: Hashable, make: Callable[[], Shared]) -> Shared:
    """The live value made for ``key`` if any holder still has it, else ``make()`` (remembered weakly).
    ``key`` must determine the value: equal keys, equal values."""
    found = _VALUES.get(key)
    if found is None:
        found = _VALUES[key] = make()
    return found  # type: ignore[return-value]  # the key determines the type too


def live_values() -> int:
    """How many distinct shared values exist (for tests and diagnostics)."""
    return len(_VALUES)
