"""``python -m webhook``: the MPIJob admission webhook over HTTPS."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Sequence

from aiohttp import web

from shared.cli import port, port_or_zero, positive_float, positive_int
from shared.logs import configure_logging
from webhook import handlers
from webhook.app import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONCURRENT_CONVERSIONS,
    DEFAULT_MAX_CONVERSION_BODY_BYTES,
    DEFAULT_MAX_CONVERSION_COST_BYTES,
    create_app,
)
from webhook.limits import ConversionLimits
from webhook.metrics import WebhookMetrics
from webhook.state import METRICS, READY_CHECK
from webhook.tls import CertificateReloader

logger = logging.getLogger("webhook")


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m webhook`` (also read by the operator guide's flag table test)."""
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
    parser.add_argument("--max-conversion-body-bytes", type=positive_int, default=DEFAULT_MAX_CONVERSION_BODY_BYTES,
                        help="largest ConversionReview accepted (a LIST page of MPIJobs), larger get 413 "
                             f"(default {DEFAULT_MAX_CONVERSION_BODY_BYTES})")
    parser.add_argument("--max-conversion-cost-bytes", type=positive_int, default=DEFAULT_MAX_CONVERSION_COST_BYTES,
                        help="most memory one ConversionReview may take, estimated from its bytes, objects, arrays "
                             "and strings before it is parsed; costlier get 413. Keep it 190 MiB under the "
                             f"container's memory limit (default {DEFAULT_MAX_CONVERSION_COST_BYTES}: 512 MiB)")
    parser.add_argument("--max-concurrent-conversions", type=positive_int, default=DEFAULT_MAX_CONCURRENT_CONVERSIONS,
                        help="ConversionReviews (and AdmissionReviews of 256 KiB or more, or chunked) read and "
                             f"answered at once; others wait, unread (default {DEFAULT_MAX_CONCURRENT_CONVERSIONS})")
    parser.add_argument("--cluster-domain", default="",
                        help="the reconciler's --cluster-domain: the host names whose length admission counts in "
                             "a job's hostfile ConfigMap (empty: <host>.<job>.<ns>.svc)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default="logfmt", choices=["logfmt", "json"])
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


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
    if not reloader.reload(log_failure=False):  # one error line, not a reload warning as well
        logger.error("cannot start: the serving certificate could not be loaded",
                     extra={"kv": {"cert_file": args.tls_cert_file, "key_file": args.tls_key_file,
                                   "reason": reloader.last_error}})
        return 1
    async with reloader:  # watching the certificate files while serving
        return await _serve_with(reloader, args)


async def _serve_with(reloader: CertificateReloader, args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT (0); 1 when an address cannot be listened on."""
    metrics = WebhookMetrics()
    metrics.watch_certificate(reloader)
    app = create_app(max_body_bytes=args.max_body_bytes, max_conversion_body_bytes=args.max_conversion_body_bytes,
                     conversions=ConversionLimits(args.max_conversion_cost_bytes, args.max_concurrent_conversions),
                     ready_check=lambda: reloader.ready, metrics=metrics, cluster_domain=args.cluster_domain)
    runners = [web.AppRunner(app, access_log=None, shutdown_timeout=10)]
    if args.health_port:
        runners.append(web.AppRunner(health_app(metrics, reloader), access_log=None))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        listening = await _listen(runners, args, reloader)
        if not listening:
            return 1
        logger.info("serving", extra={"kv": {"address": args.bind_address, "port": args.port,
                                            "health_port": args.health_port, "serial": reloader.describe()["serial"]}})
        # Everything alive now (modules, models, the app) lives as long as the process: leave it out of the
        # collector's full passes, which otherwise walk ~50,000 objects (5-10 ms, a p99 outlier) now and then.
        gc.collect()
        gc.freeze()
        await stop.wait()
        logger.info("shutting down")
    finally:
        for runner in runners:
            await runner.cleanup()
    return 0


async def _listen(runners: list[web.AppRunner], args: argparse.Namespace, reloader: CertificateReloader) -> bool:
    """Bind the HTTPS (and health) listeners; False, after one error line, when an address cannot be used."""
    sites = [(args.port, reloader.context), (args.health_port, None)][: len(runners)]
    for runner, (port_number, ssl_context) in zip(runners, sites, strict=True):
        await runner.setup()
        try:
            await web.TCPSite(runner, args.bind_address, port_number, ssl_context=ssl_context).start()
        except OSError as exc:  # address in use, not an address of this host, unknown host name
            reason = exc.strerror or str(exc) or type(exc).__name__
            logger.error("cannot start: cannot listen", extra={"kv": {
                "address": args.bind_address, "port": port_number, "reason": reason}})
            return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level, args.log_format, per_loop_turn=True)
    try:
        import uvloop  # noqa: PLC0415  (an optional speed-up)
    except ImportError:
        return asyncio.run(serve(args))
    return uvloop.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
