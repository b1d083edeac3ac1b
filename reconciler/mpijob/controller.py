"""The controller: informers feed the caches and the work queue; workers run ``Reconciler.sync``.

Child events map to the owning MPIJob (launcher Pod -> Job -> MPIJob), and wait the job's window (``window``),
as does a large job's change of status alone. Outcomes: success forgets
the key's backoff; an API error (a conflict too, logged quietly) or ErrResourceExists is requeued with
the per-key exponential backoff (errors.py has the whole tree). A deleted MPIJob's record (records.py) is
forgotten.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import aiohttp

from reconciler.mpijob import caches as slim
from reconciler.mpijob.builders import GangScheduling
from reconciler.mpijob.caches import Caches
from reconciler.mpijob.custom_resources import MPIJOBS, NATIVE_WORKLOADS, is_mpijob_ref, pod_group_resource
from reconciler.mpijob.errors import ResourceExistsError
from reconciler.mpijob.metrics import ERROR_KINDS
from reconciler.mpijob.sync import Reconciler
from reconciler.runtime.api_resources import CONFIG_MAPS, JOBS, PODS, SECRETS, SERVICES, Resource
from reconciler.runtime.client import ApiError, KubeClient
from reconciler.runtime.informer import Informer, OnChange
from reconciler.runtime.metadata import controller_of, meta
from reconciler.runtime.store import Store
from reconciler.runtime.workqueue import WorkQueue
from shared.api import constants as c
from shared.jsondict import JSONDict, object_at

logger = logging.getLogger("reconciler")
POD_SELECTOR = f"{c.LABEL_OPERATOR_NAME}={c.OPERATOR_NAME}"
CHILD_SELECTOR = "app"  # upstream labels its Service, ConfigMap, Secret and Job with app=<job>
WINDOW_WORKERS = 1000  # up to this many workers a job's child events wait child_event_delay; beyond, longer
WINDOW_MAX = 5.0  # seconds: the longest a job's child events wait (unless child_event_delay is longer)


Background = Callable[[KubeClient], Coroutine[Any, Any, None]]


class Controller:
    def __init__(  # noqa: PLR0913  three collaborators, then the process's options: keyword-only, named at the call
            self, client: KubeClient, reconciler: Reconciler, queue: WorkQueue, *, namespace: str = "",
            threadiness: int = 2, child_event_delay: float = 0.0, background: Sequence[Background] = ()) -> None:
        """``background``: further tasks of the term (the webhook's managed certificates), run beside the workers
        on the same client, cancelled with them."""
        self.client, self.reconciler, self.queue = client, reconciler, queue
        self.background = tuple(background)
        self.namespace, self.threadiness = namespace, threadiness
        self.child_event_delay = child_event_delay  # events of a job's children within it share one sync
        reconciler.shared.requeue = queue.add_after
        reconciler.shared.settler.requeue = self._requeue_progress
        self.informers = self._watch(reconciler.shared.caches, reconciler.shared.settings.gang)

    def _watch(self, caches: Caches, gang: GangScheduling | None) -> list[Informer]:
        """One informer per store of ``caches``, filling it: the sync reads what the watches deliver."""

        def informer(resource: Resource, store: Store, slimmer: slim.Slimmer, on_change: OnChange,
                     selector: str = "") -> Informer:
            return Informer(self.client, resource, slim=slimmer, on_change=on_change, namespace=self.namespace,
                            label_selector=selector, store=store)

        informers = [
            informer(MPIJOBS, caches.mpijobs, slim.slim_mpijob, self._on_mpijob),
            informer(PODS, caches.pods, slim.slim_pod, self._on_child, POD_SELECTOR),
            informer(JOBS, caches.jobs, slim.slim_job, self._on_child, CHILD_SELECTOR),
            informer(SERVICES, caches.services, slim.slim_service, self._on_child, CHILD_SELECTOR),
            informer(CONFIG_MAPS, caches.config_maps, slim.slim_config_map, self._on_child, CHILD_SELECTOR),
            informer(SECRETS, caches.secrets, slim.slim_secret, self._on_child, CHILD_SELECTOR),
        ]
        if gang is not None:  # PodGroups carry no label of ours: watched unfiltered, cached only when owned
            informers.append(informer(pod_group_resource(gang), caches.pod_groups, slim.slim_pod_group,
                                      self._on_child))
        if gang is not None and gang.is_native:
            informers.append(informer(NATIVE_WORKLOADS, caches.workloads, slim.slim_pod_group, self._on_child))
        return informers

    @property
    def jobs(self) -> Store:
        return self.reconciler.shared.caches.jobs

    def _on_mpijob(self, old: JSONDict | None, new: JSONDict | None) -> None:
        if new is None:
            if old is not None:
                self._forget(old)
            return
        if old is not None and meta(old).get("resourceVersion") == meta(new).get("resourceVersion"):
            return
        key = f"{meta(new).get('namespace', '')}/{meta(new)['name']}"
        if old is not None and (window := self.window(new)) > self.child_event_delay and _same(
                _without_status(old), _without_status(new)):
            # a large job's status changed (mostly by its own sync's write): synced with its children's events
            self.queue.add_after(key, window)
            return
        self.queue.add(key)

    def _forget(self, job: JSONDict) -> None:
        """A deleted job's record goes with it: a job re-created under its name (another UID) starts afresh."""
        self.reconciler.shared.book.forget(str(meta(job).get("uid", "")))

    def _on_child(self, old: JSONDict | None, new: JSONDict | None) -> None:
        obj = new if new is not None else old
        if obj is None or (old is not None and new is not None and _same(old, new)):
            return
        namespace = str(meta(obj).get("namespace", ""))
        ref = self._mpijob_ref(namespace, controller_of(obj))
        job = self.reconciler.shared.caches.mpijobs.get(namespace, str(ref.get("name"))) if ref else None
        if ref is None or job is None:
            return
        if new is None and obj.get("kind") == "Pod" and meta(job).get("uid") == ref.get("uid"):
            # a failurePolicy evaluates a failed pod even once it is gone: kept in the record of its own job only
            self.reconciler.shared.book.keep_removed(str(ref.get("uid")), obj)
        # the job of that name, even a successor's child: the predecessor's objects going may unblock it
        self.queue.add_after(f"{namespace}/{ref.get('name')}", self.window(job))

    def window(self, job: JSONDict | None) -> float:
        """How long the events of ``job``'s children wait to share one sync: ``child_event_delay`` up to
        ``WINDOW_WORKERS`` workers, growing with the worker count beyond (2 s at 10,000 workers with the default
        0.2 s), at most ``WINDOW_MAX`` seconds (or ``child_event_delay``, if larger). Every sync of a large job walks
        every worker: while its pods start, one sync per window keeps the syncs of a start about constant in W."""
        if job is None or self.child_event_delay <= 0:
            return self.child_event_delay
        scaled = self.child_event_delay * max(1.0, worker_count(job) / WINDOW_WORKERS)
        return min(scaled, max(WINDOW_MAX, self.child_event_delay))

    def progress_delay(self, key: str, delay: float) -> float:
        """When the settler asks for a sync in ``delay`` (a postponed progress write, settle.py): not sooner than
        the job's window, or it would undercut the window while a large job's workers start."""
        namespace, _, name = key.partition("/")
        return max(delay, self.window(self.reconciler.shared.caches.mpijobs.get(namespace, name)))

    def _requeue_progress(self, key: str, delay: float) -> None:
        self.queue.add_after(key, self.progress_delay(key, delay))

    def _mpijob_ref(self, namespace: str, ref: JSONDict | None) -> JSONDict | None:
        """The MPIJob reference of a child with controller reference ``ref``: a launcher pod's through its cached
        Job (that very Job, by UID); None when no MPIJob controls it."""
        if ref is not None and ref.get("kind") == "Job":
            launcher = self.jobs.get(namespace, str(ref.get("name")))
            matches = launcher is not None and meta(launcher).get("uid") == ref.get("uid")
            ref = controller_of(launcher) if launcher is not None and matches else None
        return ref if is_mpijob_ref(ref) else None

    async def wait_for_sync(self) -> None:
        await asyncio.gather(*(informer.synced.wait() for informer in self.informers))

    async def run(self) -> None:
        """Watch, sync the caches, then process keys until cancelled. Informers and workers share one task
        group: a fatal watch error (401/403) cancels the workers, even in the middle of a sync, and propagates."""
        try:
            async with asyncio.TaskGroup() as group:
                for informer in self.informers:
                    group.create_task(informer.run(), name=f"informer-{informer.resource.plural}")
                for i, task in enumerate(self.background):
                    group.create_task(task(self.client), name=f"background-{i}")
                await self.wait_for_sync()  # cancelled by the group when an informer fails first
                logger.info("caches synced", extra={"kv": {"mpijobs": len(self.reconciler.shared.caches.mpijobs),
                                                            "pods": len(self.reconciler.shared.caches.pods)}})
                for i in range(self.threadiness):
                    group.create_task(self._worker(), name=f"worker-{i}")
        except ExceptionGroup as errors:
            if len(errors.exceptions) == 1:  # the usual case: one informer's fatal error, raised as itself
                raise errors.exceptions[0] from None
            raise
        finally:
            self.queue.shutdown()

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self.process(key)
            finally:
                self.queue.done(key)

    async def process(self, key: str) -> None:
        started = time.perf_counter()
        outcome = "error"  # cancelled mid-sync: not an error of the sync
        try:
            outcome = str(await self.reconciler.sync(key))  # a SyncOutcome logged as its plain value
            self.queue.forget(key)
        except ApiError as error:
            outcome = "conflict" if error.conflict else "api_error"
            self.queue.add_rate_limited(key)  # a conflict too: the first retries come fast, a hot spot backs off
            logger.info("sync requeued", extra={"kv": {"key": key, "error": str(error)}})
        except ResourceExistsError as error:
            outcome = "resource_exists"
            self.queue.add_rate_limited(key)
            logger.warning("sync blocked", extra={"kv": {"key": key, "error": str(error)}})
        except (aiohttp.ClientError, OSError) as error:  # the API server unreachable or restarting: one line
            outcome = "unreachable"
            self.queue.add_rate_limited(key)
            logger.warning("sync failed", extra={"kv": {"key": key, "error": repr(error)}})
        except Exception:
            outcome = "internal"
            self.queue.add_rate_limited(key)
            logger.exception("error syncing", extra={"kv": {"key": key}})
        finally:
            if outcome in ERROR_KINDS:
                self.reconciler.metrics.reconcile_errors.labels(outcome).inc()
            logger.info("sync", extra={"kv": {"key": key, "outcome": outcome,
                                              "duration_ms": round((time.perf_counter() - started) * 1e3, 1)}})


def worker_count(job: JSONDict) -> int:
    """``spec.mpiReplicaSpecs.Worker.replicas`` of a cached job, 0 when absent or not a number."""
    worker = object_at(job, "spec", "mpiReplicaSpecs", c.WORKER)
    replicas = worker.get("replicas") if worker is not None else None
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 0


def _without_status(job: JSONDict) -> JSONDict:
    return {key: value for key, value in job.items() if key != "status"}


def _same(old: JSONDict, new: JSONDict) -> bool:
    """True when a child changed nothing but its resourceVersion (or nothing at all)."""
    if meta(old).get("resourceVersion") == meta(new).get("resourceVersion"):
        return True
    strip = ("resourceVersion",)
    return {**old, "metadata": {k: v for k, v in meta(old).items() if k not in strip}} == {
        **new, "metadata": {k: v for k, v in meta(new).items() if k not in strip}}
