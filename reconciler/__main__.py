"""``python -m reconciler``: the MPIJob reconciler process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import platform
import signal
import sys
from collections.abc import Sequence

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from reconciler.mpijob.builders import GangScheduling
from reconciler.mpijob.caches import Caches
from reconciler.mpijob.cluster import KubeCluster
from reconciler.mpijob.context import Settings
from reconciler.mpijob.controller import Controller
from reconciler.mpijob.metrics import OperatorMetrics
from reconciler.mpijob.resources import MPIJOBS
from reconciler.mpijob.sshkeys import generate_ssh_key_pair
from reconciler.mpijob.sync import Reconciler
from reconciler.options import Options, OptionsError, parse_options
from reconciler.runtime.client import ApiError, KubeClient, load_configuration
from reconciler.runtime.leader import LeaderElector
from reconciler.runtime.settle import Settler
from reconciler.runtime.workqueue import WorkQueue
from shared.logs import configure_logging

VERSION = "0.1.0"
logger = logging.getLogger("reconciler")


def version_lines() -> list[str]:
    return ["API Version: v2", f"Version: {VERSION}", f"Python Version: {platform.python_version()}",
            f"OS/Arch: {platform.system().lower()}/{platform.machine()}"]


async def _serve(port: int, routes: list[web.RouteDef]) -> web.AppRunner | None:
    if not port:
        return None
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port).start()
    return runner


async def run(options: Options) -> int:
    configuration = await load_configuration(options.kubeconfig, options.master)
    client = KubeClient(configuration, options.kube_api_qps, options.kube_api_burst)
    try:
        await client.request("GET", MPIJOBS.path(options.namespace), params={"limit": "1"})
    except ApiError as error:
        await client.close()
        if error.not_found:
            logger.error("CRD doesn't exist. Exiting")
            return 1
        raise
    metrics = OperatorMetrics()
    gang = GangScheduling.from_flag(options.gang_scheduling)
    settings = Settings(options.cluster_domain, gang, options.max_concurrent_writes)
    reconciler = Reconciler(Caches(), KubeCluster(client), settings, metrics, generate_ssh_key_pair,
                            settler=Settler(options.progress_write_interval))
    controller = Controller(client, reconciler, WorkQueue(options.queue_rate_limit, options.queue_burst),
                            namespace=options.namespace, threadiness=options.threadiness,
                            child_event_delay=options.child_event_delay, gang=gang)

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def metrics_page(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    runners = [await _serve(options.health_port, [web.get("/healthz", healthz)]),
               await _serve(options.monitoring_port, [web.get("/metrics", metrics_page)])]
    try:
        return await _lead(options, client, controller, metrics)
    finally:
        for runner in runners:
            if runner is not None:
                await runner.cleanup()
        await client.close()


async def _lead(options: Options, client: KubeClient, controller: Controller, metrics: OperatorMetrics) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    elector = LeaderElector(client, options.lock_namespace) if options.leader_elect else None
    if elector is not None:
        acquiring = asyncio.create_task(elector.acquire())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([acquiring, stopping], return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            acquiring.cancel()
            return 0
        stopping.cancel()
    metrics.is_leader.set(1)
    tasks = [asyncio.create_task(controller.run()), asyncio.create_task(stop.wait())]
    if elector is not None:
        tasks.append(asyncio.create_task(elector.keep()))
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    metrics.is_leader.set(0)
    if stop.is_set():
        logger.info("stopped")
        return 0
    for task in done:
        if task.exception() is not None:
            logger.error("controller stopped", exc_info=task.exception())
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    try:
        options = parse_options(argv)
    except OptionsError as error:
        print(f"python -m reconciler: error: {error}", file=sys.stderr)
        return 2
    if options.version:
        print("\n".join(version_lines()))
        return 0
    configure_logging(options.log_level, options.log_format)
    return asyncio.run(run(options))


if __name__ == "__main__":
    sys.exit(main())
