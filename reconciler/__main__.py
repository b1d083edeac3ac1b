"""``python -m reconciler``: the MPIJob reconciler process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import platform
import signal
import sys
from collections.abc import Coroutine, Sequence
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
from reconciler.runtime.client import ApiError, KubeClient, StartupError
from reconciler.runtime.health import Health, serve
from reconciler.runtime.kubeconfig import load_configuration
from reconciler.runtime.leader import LeaderElector
from reconciler.runtime.memory import release_periodically
from reconciler.runtime.settle import Settler
from reconciler.runtime.workqueue import WorkQueue
from reconciler.settings import Settings
from shared.logs import configure_logging

VERSION = "0.1.0"
logger = logging.getLogger("reconciler")


def version_lines() -> list[str]:
    return ["API Version: v2", f"Version: {VERSION}", f"Python Version: {platform.python_version()}",
            f"OS/Arch: {platform.system().lower()}/{platform.machine()}"]


async def run(options: Options) -> int:
    configuration = await load_configuration(options.kubeconfig, options.master)
    client = KubeClient(configuration, options.kube_api_qps, options.kube_api_burst)
    try:
        await _check_crd(client, options.namespace, configuration.host)
    except (StartupError, _CrdMissingError):
        await client.close()
        raise
    metrics = OperatorMetrics()
    settings = Settings.from_options(options)
    shared = Shared(Caches(), KubeCluster(client), settings, generate_ssh_key_pair,
                    settler=Settler(options.progress_write_interval))
    queue = WorkQueue(options.queue_rate_limit, options.queue_burst)
    queue.on_wait, queue.on_retry = metrics.queue_wait.observe, metrics.queue_retries.inc
    metrics.watch_queue(queue.__len__)
    metrics.watch_jobs(shared.caches.mpijobs)
    controller = Controller(client, Reconciler(shared, metrics), queue, namespace=options.namespace,
                            threadiness=options.threadiness, child_event_delay=options.child_event_delay,
                            background=webhook_certificates(options, metrics.registry))
    # Leader election has a client of its own (own connections, no client-side rate limit): its renewals
    # must never wait behind the controller's bulk writes, or a large job costs the Lease.
    lease_client = KubeClient(configuration, qps=0, burst=1) if options.leader_elect else None
    elector = LeaderElector(lease_client, options.lock_namespace) if lease_client is not None else None
    health = Health()

    async def metrics_page(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    runners = [await serve(options.health_port, [web.get("/healthz", health.healthz)]),
               await serve(options.monitoring_port, [web.get("/metrics", metrics_page)])]
    try:
        return await _lead(controller, elector, health, metrics)
    finally:
        for runner in runners:
            if runner is not None:
                await runner.cleanup()
        await client.close()
        if lease_client is not None:
            await lease_client.close()


class _CrdMissingError(Exception):
    pass


async def _check_crd(client: KubeClient, namespace: str, host: str) -> None:
    """The MPIJob API answers; StartupError (or _CrdMissingError) says why not."""
    try:
        await client.request("GET", MPIJOBS.path(namespace), params={"limit": "1"})
    except ApiError as error:
        if error.not_found:
            raise _CrdMissingError from None
        raise StartupError(f"the API server at {host} refused to list MPIJobs: {error}") from None
    except (aiohttp.ClientError, OSError) as error:
        raise StartupError(f"cannot reach the API server at {host}: {error or type(error).__name__}") from None


async def _lead(controller: Controller, elector: LeaderElector | None, health: Health,
                metrics: OperatorMetrics) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if elector is not None:
        health.add("leader", elector.problem)  # a standby too: its Lease refused for a lease duration fails it
    if elector is not None and not await _until_leader(elector, stop):
        return 0
    health.add("informers", lambda: _stopped_informers(controller))
    metrics.is_leader.set(1)
    tasks = [asyncio.create_task(controller.run()), asyncio.create_task(stop.wait()),
             asyncio.create_task(release_periodically())]
    if elector is not None:
        tasks.append(asyncio.create_task(elector.keep()))
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    metrics.is_leader.set(0)
    if elector is not None and stop.is_set():
        await elector.release()
    if stop.is_set():
        logger.info("stopped")
        return 0
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            logger.error("controller stopped", exc_info=task.exception())
    return 1


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
    except _CrdMissingError:
        logger.error("CRD doesn't exist. Exiting")
        return 1


if __name__ == "__main__":
    sys.exit(main())
