"""``python -m webhook``: the MPIJob admission webhook over HTTPS."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from aiohttp import web

from shared.cli import port, port_or_zero, positive_float, positive_int
from shared.logs import configure_logging
from webhook import handlers
from webhook.app import DEFAULT_MAX_BODY_BYTES, create_app
from webhook.metrics import WebhookMetrics
from webhook.state import METRICS, READY_CHECK
from webhook.tls import CertificateReloader

logger = logging.getLogger("webhook")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m webhook", description=__doc__)
    parser.add_argument("--port", type=port, default=9443, help="HTTPS port for admission, health and metrics")
    parser.add_argument("--bind-address", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    parser.add_argument("--tls-cert-file", required=True, help="PEM certificate chain; reloaded when it changes")
    parser.add_argument("--tls-key-file", required=True, help="PEM private key; reloaded when it changes")
    parser.add_argument("--cert-reload-interval", type=positive_float, default=2.0,
                        help="seconds between checks of the certificate files (default 2)")
    parser.add_argument("--health-port", type=port_or_zero, default=0,
                        help="also serve /healthz, /readyz and /metrics over plain HTTP on this port (0: off)")
    parser.add_argument("--max-body-bytes", type=positive_int, default=DEFAULT_MAX_BODY_BYTES,
                        help=f"largest AdmissionReview accepted, larger get 413 (default {DEFAULT_MAX_BODY_BYTES})")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default="logfmt", choices=["logfmt", "json"])
    return parser.parse_args(argv)


def health_app(metrics: WebhookMetrics, reloader: CertificateReloader) -> web.Application:
    app = web.Application()
    app[METRICS] = metrics
    app[READY_CHECK] = lambda: reloader.ready
    app.router.add_get("/healthz", handlers.healthz)
    app.router.add_get("/readyz", handlers.readyz)
    app.router.add_get("/metrics", handlers.metrics)
    return app


async def serve(args: argparse.Namespace) -> int:
    reloader = CertificateReloader(args.tls_cert_file, args.tls_key_file, poll_interval=args.cert_reload_interval)
    await reloader.start()
    if not reloader.ready:
        logger.error("cannot start: the serving certificate could not be loaded",
                     extra={"kv": {"cert_file": args.tls_cert_file, "key_file": args.tls_key_file,
                                   "reason": reloader.last_error}})
        await reloader.stop()
        return 1
    metrics = WebhookMetrics()
    metrics.watch_certificate(reloader)
    runners = [web.AppRunner(create_app(max_body_bytes=args.max_body_bytes, ready_check=lambda: reloader.ready,
                                        metrics=metrics), access_log=None, shutdown_timeout=10)]
    if args.health_port:
        runners.append(web.AppRunner(health_app(metrics, reloader), access_log=None))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await runners[0].setup()
        await web.TCPSite(runners[0], args.bind_address, args.port, ssl_context=reloader.context).start()
        if args.health_port:
            await runners[1].setup()
            await web.TCPSite(runners[1], args.bind_address, args.health_port).start()
        logger.info("serving", extra={"kv": {"address": args.bind_address, "port": args.port,
                                            "health_port": args.health_port, "serial": reloader.describe()["serial"]}})
        await stop.wait()
        logger.info("shutting down")
    finally:
        for runner in runners:
            await runner.cleanup()
        await reloader.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    try:
        import uvloop  # noqa: PLC0415  (an optional speed-up)
    except ImportError:
        return asyncio.run(serve(args))
    return uvloop.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
