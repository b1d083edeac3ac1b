"""Objects the reconciler created and its caches have not shown yet.

Without this, a sync that runs before the watch delivers the pods it just created would try to
create them again (a 409 and a GET each). Expectations expire, so an object deleted before it was
ever observed cannot block its re-creation for long: five minutes, client-go's ExpectationsTimeout (a minute was
shorter than a 10,000-worker creation, and a sync retried after it re-sent the creates its cache did not show yet).
The reconciler keeps one per job, which goes with the job.
"""

from __future__ import annotations

import time

TTL_SECONDS = 300.0


class Expectations:
    """Names this process created (or deleted) whose creation (or deletion) the cache has not shown yet."""

    def __init__(self, ttl: float = TTL_SECONDS) -> None:
        self.ttl = ttl
        self._pending: dict[tuple[str, str], float] = {}
        self.deletions = _Pending(ttl)

    def created(self, namespace: str, name: str) -> None:
        self._pending[(namespace, name)] = time.monotonic() + self.ttl

    def observed(self, namespace: str, name: str) -> None:
        self._pending.pop((namespace, name), None)

    def pending(self, namespace: str, name: str) -> bool:
        deadline = self._pending.get((namespace, name))
        if deadline is None:
            return False
        if deadline < time.monotonic():
            del self._pending[(namespace, name)]
            return False
        return True


class _Pending:
    """Deletions by name, each of the object (UID) that was deleted: a new object under the same name (a
    worker deleted and re-created while its deletion was never observed) is not taken for the old one."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._until: dict[tuple[str, str], tuple[float, str]] = {}

    def add(self, namespace: str, name: str, uid: str = "") -> None:
        self._until[(namespace, name)] = (time.monotonic() + self.ttl, uid)

    def discard(self, namespace: str, name: str) -> None:
        self._until.pop((namespace, name), None)

    def holds(self, namespace: str, name: str, uid: str = "") -> bool:
        """Whether the object ``uid`` of that name is being deleted by us (an entry of another UID is dropped)."""
        entry = self._until.get((namespace, name))
        if entry is None:
            return False
        deadline, deleted = entry
        if deadline < time.monotonic() or (uid and deleted and uid != deleted):
            del self._until[(namespace, name)]
            return False
        return True

    def __contains__(self, key: tuple[str, str]) -> bool:
        return self.holds(*key)
