"""What the reconciler remembers about each MPIJob between its syncs, in one record keyed by the job's UID and
forgotten in one place (docs/reconciler.md, "What a job's record holds"): a job deleted and created again
under its name is another UID, so it starts with a record of its own, and a deleted job leaves nothing behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.mpijob.policy_decisions import is_evaluated
from reconciler.runtime.expectations import Expectations
from reconciler.runtime.metadata import meta
from reconciler.runtime.settle import SettleMemory
from shared.api import constants as c
from shared.jsondict import JSONDict


@dataclass
class JobRecord:
    """One job's memory: its creations and deletions the cache has not shown yet, its progress writes (for the
    settler), the restart count this process last wrote (a cache that does not show that write yet must not
    make the attempt it ended look current), the pods a failurePolicy evaluates that were removed before a
    sync saw them (by pod UID), and whether a worker pod without its rank label was reported."""

    expectations: Expectations = field(default_factory=Expectations)
    settled: SettleMemory = field(default_factory=SettleMemory)
    restarts: int = 0
    removed: dict[str, JSONDict] = field(default_factory=dict)
    unranked_said: bool = False  # a worker Job's pod without its rank label was reported (once per job and process)

    def removed_pods(self) -> list[JSONDict]:
        """The removed pods, by name."""
        return sorted(self.removed.values(), key=lambda pod: str(meta(pod).get("name", "")))

    def evaluated(self, pods: list[JSONDict]) -> None:
        """These removed pods were judged by a sync: forgotten, unless removed again since (another object)."""
        for pod in pods:
            uid = str(meta(pod).get("uid", ""))
            if self.removed.get(uid) is pod:
                del self.removed[uid]


@dataclass
class JobBook:
    """The records of the jobs the process knows, by MPIJob UID."""

    _records: dict[str, JobRecord] = field(default_factory=dict)

    def record(self, uid: str) -> JobRecord:
        """The job's record, made on first use."""
        record = self._records.get(uid)
        if record is None:
            record = self._records[uid] = JobRecord()
        return record

    def keep_removed(self, owner: str, pod: JSONDict) -> None:
        """Keep a removed pod of the job ``owner`` (a job the caches hold: the caller checked) that a rule may
        evaluate; any other is dropped."""
        labels = meta(pod).get("labels") or {}
        if owner and c.RESTART_ATTEMPT_LABEL in labels and is_evaluated(pod):
            self.record(owner).removed[str(meta(pod).get("uid", ""))] = pod

    def forget(self, uid: str) -> None:
        """Everything about the job ``uid``."""
        self._records.pop(uid, None)

    def __contains__(self, uid: object) -> bool:
        return uid in self._records

    def __len__(self) -> int:
        return len(self._records)
