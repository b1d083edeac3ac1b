"""One sync of one MPIJob: the facts about the job it asks most often (``JobFacts``, plain data), what every
sync of the process shares (``Shared``: the caches it reads, the cluster it writes to, and the rest), and
``job_context``, which makes every sync's ``JobContext``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from reconciler.mpijob.builders.job_facts import is_suspended, run_policy_of, worker_replicas
from reconciler.mpijob.caches import Caches
from reconciler.mpijob.cluster import Cluster, record_events
from reconciler.mpijob.policy_decisions import current_attempt, failure_policy_of, with_attempt
from reconciler.mpijob.priorities import PriorityClassCache
from reconciler.mpijob.records import JobBook, JobRecord
from reconciler.mpijob.sshkeys import SSHKeyPair
from reconciler.mpijob.status import Event
from reconciler.mpijob.worker_backends import chosen_worker_backend
from reconciler.runtime.metadata import is_controlled_by
from reconciler.runtime.settle import Requeue, Settler
from reconciler.settings import Settings
from shared.api import MPIJob, names
from shared.api import constants as c
from shared.api.v2types import FailurePolicy
from shared.api.worker_backend import WORKER_BACKEND_INDEXED_JOB, WORKER_BACKEND_PODS, worker_job_name
from shared.jsondict import JSONDict


@dataclass
class Shared:
    """What every sync shares, made once per term: the caches and the cluster, the settings, the SSH key
    generator, the write slots, the spacing rule of progress-only writes, the PriorityClass values read, the
    requeue of a job's key after a delay, and what the process remembers of each job (``book``, by UID)."""

    caches: Caches
    cluster: Cluster
    settings: Settings
    keygen: Callable[[], SSHKeyPair]
    settler: Settler = field(default_factory=Settler)
    priority_classes: PriorityClassCache = field(default_factory=PriorityClassCache)  # with --gang-scheduling
    book: JobBook = field(default_factory=JobBook)
    requeue: Requeue = lambda key, delay: None  # the work queue's add_after, set by the controller
    writes: asyncio.Semaphore = field(init=False)  # ``settings.max_concurrent_writes`` slots, for all the syncs

    def __post_init__(self) -> None:
        self.writes = asyncio.Semaphore(self.settings.max_concurrent_writes)


@dataclass(frozen=True)
class JobFacts:
    """The job being synced and the time of the sync: what the pure steps of a sync read."""

    job: MPIJob  # defaulted and validated
    cached: JSONDict  # the MPIJob as the cache holds it: never mutated
    now: str

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


@dataclass(frozen=True)
class JobContext(JobFacts):
    """The facts of one sync and what every sync shares: what the steps that read or write the cluster take."""

    shared: Shared
    failure_policy: FailurePolicy | None = None  # spec.runPolicy.failurePolicy, kept in the v2-spec annotation
    attempt: int = 0  # the restart attempt the job is at (only with a failurePolicy)
    worker_backend: str = WORKER_BACKEND_PODS  # how its workers run (worker_backends.py), chosen once per sync

    @property
    def indexed(self) -> bool:
        """Whether the workers are the pods of an Indexed worker Job (else plain Pods, upstream's)."""
        return self.worker_backend == WORKER_BACKEND_INDEXED_JOB

    @property
    def record(self) -> JobRecord:
        """What the process remembers of this job (this UID) between syncs."""
        return self.shared.book.record(self.uid)

    def labelled(self, obj: JSONDict) -> JSONDict:
        """A worker or launcher Job to create, with the attempt label when the job has a failurePolicy."""
        return obj if self.failure_policy is None else with_attempt(obj, self.attempt)

    async def event(self, *events: Event) -> None:
        """Record events on the MPIJob now (best effort)."""
        await record_events(self.shared.cluster, self.cached, events, self.now)


def job_context(job: MPIJob, cached: JSONDict, now: str, shared: Shared) -> JobContext:
    """The sync's context: the worker backend, the failurePolicy the job keeps in its annotation and, with one,
    its attempt (the highest of its status, its launcher Job's, its worker Job's and its workers')."""
    backend = chosen_worker_backend(cached, shared.caches, shared.settings.default_worker_backend)
    policy = failure_policy_of(cached)
    if policy is None:
        return JobContext(job, cached, now, shared, worker_backend=backend)
    uid = str(job.metadata.get("uid", ""))
    launcher = shared.caches.jobs.get(job.namespace, names.launcher_name(job.name))
    objects = [p for p in shared.caches.pods.select(job.namespace, names.role_selector(job.name, c.ROLE_WORKER))
               if is_controlled_by(p, uid)]
    worker_job = shared.caches.jobs.get(job.namespace, worker_job_name(job.name))
    for owned in (launcher, worker_job):
        if owned is not None and is_controlled_by(owned, uid):
            objects.append(owned)
    attempt = current_attempt(cached.get("status") or {}, objects, shared.book.record(uid).restarts)
    return JobContext(job, cached, now, shared, policy, attempt, backend)
