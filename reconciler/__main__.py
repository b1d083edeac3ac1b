"""``python -m reconciler``: the MPIJob reconciler process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import platform
import signal
import sys
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, disable_created_metrics, generate_latest

from reconciler.certs import webhook_certificates
from reconciler.mpijob.caches import Caches
from reconciler.mpijob.cluster import KubeCluster
from reconciler.mpijob.context import Shared
from reconciler.mpijob.controller import Controller
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.mpijob.metrics import OperatorMetrics
from reconciler.mpijob.sshkeys import generate_ssh_key_pair
from reconciler.mpijob.sync import Reconciler
from reconciler.options import Options, OptionsError, parse_options
from reconciler.runtime import loop_errors
from reconciler.runtime.client import ApiError, KubeClient, StartupError
from reconciler.runtime.health import Health, serve
from reconciler.runtime.kubeconfig import load_configuration
from reconciler.runtime.leader import LeaderElector
from reconciler.runtime.settle import Settler
from reconciler.runtime.startup import ApiWait, Unavailable, transient_reason
from reconciler.runtime.workqueue import WorkQueue
from reconciler.settings import Settings
from shared.jsondict import JSONDict
from shared.logs import configure_logging

VERSION = "0.1.0"
logger = logging.getLogger("reconciler")


def version_lines() -> list[str]:
    return ["API Version: v2", f"Version: {VERSION}", f"Python Version: {platform.python_version()}",
            f"OS/Arch: {platform.system().lower()}/{platform.machine()}"]


async def run(options: Options) -> int:
    """The process: its endpoints, the start-up wait for the API server, then leadership terms until SIGTERM.

    Outages without crash loops: at start-up an API server that is down, unreachable or not ready is waited for
    (``reconciler.runtime.startup``: capped exponential back-off with jitter, one log line per attempt, the
    reason on ``/readyz`` while ``/healthz`` stays 200); a refusal (401/403) or the MPIJob API not served (the
    CRD missing) by an API server that says it is ready exits 1 at once, as before. After a lost Lease the
    process stops reconciling and campaigns again in-process (``_lead``), rather than exiting: see there why.
    """
    loop_errors.install(asyncio.get_running_loop())
    configuration = await load_configuration(options.kubeconfig, options.master)
    stop = _stop_on_signals()
    client = KubeClient(configuration, options.kube_api_qps, options.kube_api_burst)
    # Leader election has a client of its own (own connections, no client-side rate limit): its renewals
    # must never wait behind the controller's bulk writes, or a large job costs the Lease.
    lease_client = KubeClient(configuration, qps=0, burst=1) if options.leader_elect else None
    metrics = OperatorMetrics()
    terms = Terms(client, metrics, options)
    health = Health()

    async def metrics_page(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    runners: list[web.AppRunner | None] = []
    try:
        runners += [await serve(options.health_port, health.routes()),
                    await serve(options.monitoring_port, [web.get("/metrics", metrics_page)])]
        if not await _wait_for_api(client, options.namespace, configuration.host, health, stop):
            logger.info("stopped")
            return 0
        elector = LeaderElector(lease_client, options.lock_namespace) if lease_client is not None else None
        return await _lead(terms, elector, health, metrics, stop)
    finally:
        for runner in runners:
            if runner is not None:
                await runner.cleanup()
        await client.close()
        if lease_client is not None:
            await lease_client.close()


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


class _CrdMissingError(Exception):
    """MPIJobs are not served by a ready API server; ``why`` explains a known cause (else upstream's line alone)."""

    def __init__(self, why: str = "") -> None:
        super().__init__(why)
        self.why = why


TRAINING_OPERATOR_CRD = (
    "mpijobs.kubeflow.org serves kubeflow.org/v1 only: that is Kubeflow Training Operator v1's MPIJob CRD, not this "
    "operator's (kubeflow.org/v2beta1), and the API server refuses one over the other while v1 MPIJobs are stored. "
    'Choose one operator for MPIJobs: docs/migration.md, "Kubeflow Training Operator v1"')


async def _training_operator_crd(client: KubeClient) -> bool:
    """Whether kubeflow.org/v1 serves MPIJobs (discovery, readable by every authenticated user)."""
    try:
        served = await client.request("GET", "/apis/kubeflow.org/v1")
    except ApiError:
        return False
    return any(resource.get("name") == "mpijobs" for resource in served.get("resources") or [])


async def _wait_for_api(client: KubeClient, namespace: str, host: str, health: Health, stop: asyncio.Event) -> bool:
    """Until the MPIJob API answers (True), or SIGTERM (False). StartupError (or _CrdMissingError) says why the
    process cannot start: what is not worth waiting for (``startup.transient_reason``)."""
    waiting = ApiWait(host)
    health.add_readiness("api", waiting.problem)

    async def list_mpijobs() -> None:
        try:
            await client.request("GET", MPIJOBS.path(namespace), params={"limit": "1"})
        except Exception as error:
            reason = await transient_reason(client, host, error)
            if reason is not None:
                raise Unavailable(reason) from None
            if isinstance(error, ApiError) and error.not_found:
                raise _CrdMissingError(TRAINING_OPERATOR_CRD if await _training_operator_crd(client) else "") from None
            if isinstance(error, ApiError):
                raise StartupError(f"the API server at {host} refused to list MPIJobs: {error}") from None
            if isinstance(error, aiohttp.ClientError | OSError):
                raise StartupError(f"cannot use the API server at {host}: {error or type(error).__name__}") from None
            raise

    return await waiting.wait(list_mpijobs, stop)


class Terms:
    """The controller of each leadership term, made afresh: caches, work queue and every job's record
    (mpijob/records.py) of one term are never seen by the next, which starts as a new process would
    (a relist of everything, then syncs from what the cluster holds). The API client, the metrics and the
    endpoints outlive the terms; the metrics read the current term's queue and jobs."""

    def __init__(self, client: KubeClient, metrics: OperatorMetrics, options: Options) -> None:
        self.client, self.metrics, self.options = client, metrics, options
        self.settings = Settings.from_options(options)
        self.background = webhook_certificates(options, metrics.registry)  # once: its metrics are the process's
        self.current: Controller | None = None
        self.count = 0
        metrics.watch_queue(lambda: len(self.current.queue) if self.current is not None else 0)
        metrics.watch_jobs(self)

    def __iter__(self) -> Iterator[JSONDict]:
        return iter(self.current.reconciler.shared.caches.mpijobs) if self.current is not None else iter(())

    def begin(self) -> Controller:
        options, metrics = self.options, self.metrics
        shared = Shared(Caches(), KubeCluster(self.client), self.settings, generate_ssh_key_pair,
                        settler=Settler(options.progress_write_interval))
        queue = WorkQueue(options.queue_rate_limit, options.queue_burst)
        queue.on_wait, queue.on_retry = metrics.queue_wait.observe, metrics.queue_retries.inc
        self.current = Controller(self.client, Reconciler(shared, metrics), queue, namespace=options.namespace,
                                  threadiness=options.threadiness, child_event_delay=options.child_event_delay,
                                  background=self.background)
        self.count += 1
        return self.current

    async def end(self) -> None:
        """Forget the term (its tasks are over); its connections are closed."""
        self.current = None
        await self.client.close()


STOPPED, LOST, FAILED = "stopped", "lost", "failed"


async def _lead(terms: Terms, elector: LeaderElector | None, health: Health, metrics: OperatorMetrics,
                stop: asyncio.Event) -> int:
    """Reconcile while leading, one term per Lease held, until SIGTERM (0) or a fatal error (1). A lost Lease ends
    the term (its informers and workers cancelled and awaited, its caches, queue and bookkeeping dropped) and the
    process campaigns again with the same identity instead of exiting: why, in docs/reconciler.md ("Outages")."""
    health.add("informers", lambda: _stopped_informers(terms.current) if terms.current is not None else None)
    health.add_readiness("caches", lambda: _unsynced(terms.current) if terms.current is not None else None)
    if elector is None:
        outcome = await _reconcile(terms.begin(), None, stop, metrics)
        await terms.end()
        return 0 if outcome == STOPPED else 1
    health.add("leader", elector.problem)  # a standby too: its Lease refused for a lease duration fails it
    health.add_readiness("lease", elector.readiness)
    while True:
        if not await _until_leader(elector, stop):
            logger.info("stopped")
            return 0
        outcome = await _reconcile(terms.begin(), elector, stop, metrics)
        await terms.end()
        if outcome == STOPPED:
            await elector.release()
            return 0
        if outcome == FAILED:
            return 1
        logger.warning("stopped reconciling: Lease lost; caches and work queue dropped, campaigning again",
                       extra={"kv": {"identity": elector.identity, "term": terms.count}})


async def _reconcile(controller: Controller, elector: LeaderElector | None, stop: asyncio.Event,
                     metrics: OperatorMetrics) -> str:
    """One term: run the controller until SIGTERM (STOPPED), the Lease lost (LOST) or the controller failed
    (FAILED). Every task of the term is over when this returns."""
    metrics.is_leader.set(1)
    controlling = asyncio.create_task(controller.run(), name="controller")
    tasks = [controlling, asyncio.create_task(stop.wait())]
    keeping = asyncio.create_task(elector.keep(), name="lease") if elector is not None else None
    if keeping is not None:
        tasks.append(keeping)
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    metrics.is_leader.set(0)
    if stop.is_set():
        logger.info("stopped")
        return STOPPED
    failed = [task for task in done if not task.cancelled() and task.exception() is not None]
    for task in failed:
        logger.error("controller stopped" if task is controlling else "leader election failed",
                     exc_info=task.exception())
    if keeping is not None and keeping in done and not failed:
        return LOST
    return FAILED


async def _until_leader(elector: LeaderElector, stop: asyncio.Event) -> bool:
    """Wait for the Lease; False when asked to stop first. Only a Lease really held returns True; a Lease never
    allowed raises LeaseRefusedError (a StartupError)."""
    acquiring = asyncio.create_task(elector.acquire())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait([acquiring, stopping], return_when=asyncio.FIRST_COMPLETED)
    for task in (stopping, acquiring):  # acquiring last: its error propagates
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return not stop.is_set() and elector.leading.is_set()


def _unsynced(controller: Controller) -> str | None:
    waiting = [informer.resource.plural for informer in controller.informers if not informer.synced.is_set()]
    return f"not synced yet: {', '.join(waiting)}" if waiting else None


def _stopped_informers(controller: Controller) -> str | None:
    stopped = [informer.resource.plural for informer in controller.informers
               if informer.started and not informer.running]
    return f"stopped: {', '.join(stopped)}" if stopped else None


def run_event_loop(main: Coroutine[Any, Any, int]) -> int:
    """Run ``main`` on uvloop when it is installed (as the webhook does), else on asyncio's own loop.

    uvloop's TLS transport reads into a buffer of at most 64 KiB that is not zero-filled, where asyncio's
    zero-fills 256 KiB per connection (SSLProtocol.max_size, no public setting): with the 64 API connections of
    a large job's burst of creates open, +5 MiB of RSS instead of +20 MiB (docs/reconciler.md, Tuning).
    """
    try:
        import uvloop  # noqa: PLC0415  (optional: not built for every platform)
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["render"]:
        from reconciler import render  # noqa: PLC0415  (the offline renderer needs no API client)

        return render.main(arguments[1:])
    try:
        options = parse_options(arguments)
    except OptionsError as error:
        print(f"python -m reconciler: error: {error}", file=sys.stderr)
        return 2
    if options.version:
        print("\n".join(version_lines()))
        return 0
    configure_logging(options.log_level, options.log_format)
    # upstream's Go metrics have no _created series; they would double ours (the function is untyped)
    disable_created_metrics()  # type: ignore[no-untyped-call]
    try:
        return run_event_loop(run(options))
    except StartupError as error:
        print(f"python -m reconciler: error: {error}", file=sys.stderr)
        return 1
    except _CrdMissingError as error:
        if error.why:
            logger.error(error.why)
        logger.error("CRD doesn't exist. Exiting")
        return 1


if __name__ == "__main__":
    sys.exit(main())
