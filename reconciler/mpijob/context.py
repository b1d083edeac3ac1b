"""Everything one sync of one MPIJob needs, and the facts about the job it asks most often."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from reconciler.mpijob.builders.job_facts import is_suspended, run_policy_of, worker_replicas
from reconciler.mpijob.caches import Caches
from reconciler.mpijob.cluster import Cluster, record_events
from reconciler.mpijob.sshkeys import SSHKeyPair
from reconciler.mpijob.status import Event
from reconciler.runtime.expectations import Expectations
from reconciler.runtime.settle import Settler
from reconciler.settings import Settings
from shared.api import MPIJob
from shared.api import constants as c
from shared.jsondict import JSONDict


@dataclass
class JobContext:
    job: MPIJob  # defaulted and validated
    cached: JSONDict  # the MPIJob as the cache holds it: never mutated
    caches: Caches
    cluster: Cluster
    settings: Settings
    keygen: Callable[[], SSHKeyPair]
    now: str
    writes: asyncio.Semaphore  # the process's write slots (``Settings.max_concurrent_writes``), shared by all syncs
    expectations: Expectations = field(default_factory=Expectations)
    settler: Settler = field(default_factory=Settler)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def namespace(self) -> str:
        return self.job.namespace

    @property
    def uid(self) -> str:
        return str(self.job.metadata.get("uid", ""))

    @property
    def suspended(self) -> bool:
        return is_suspended(self.job)

    @property
    def clean_pod_policy(self) -> str:
        return run_policy_of(self.job).clean_pod_policy or c.CLEAN_POD_POLICY_NONE

    @property
    def launcher_at_startup(self) -> bool:
        policy = self.job.spec.launcher_creation_policy if self.job.spec else None
        return policy == c.LAUNCHER_AT_STARTUP

    @property
    def worker_replicas(self) -> int:
        return worker_replicas(self.job)

    async def event(self, *events: Event) -> None:
        """Record events on the MPIJob now (best effort)."""
        await record_events(self.cluster, self.cached, events, self.now)
