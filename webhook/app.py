"""The webhook's aiohttp application."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

from aiohttp import web

from webhook import admission, handlers, pod_index
from webhook.limits import ConversionLimits
from webhook.metrics import WebhookMetrics
from webhook.state import (
    ADMISSION_BODY_LIMIT,
    CONVERSION_BODY_LIMIT,
    CONVERSION_COST_LIMIT,
    LARGE_REQUEST_GATE,
    METRICS,
    READY_CHECK,
)

MUTATE_PATH = "/mutate-kubeflow-org-v2beta1-mpijob"
VALIDATE_PATH = "/validate-kubeflow-org-v2beta1-mpijob"  # both paths admit kubeflow.org/v2 as well
CONVERT_PATH = "/convert"
POD_INDEX_PATH = "/mutate--v1-pod"  # the IndexedJob backend's worker pods: their rank label (webhook/pod_index.py)
# An MPIJob carries two full pod templates; the API server itself accepts objects up to ~3 MiB in etcd
# and requests up to 3 MiB (JSON) by default, but a review carries object and oldObject: 8 MiB leaves room.
DEFAULT_MAX_BODY_BYTES = handlers.DEFAULT_ADMISSION_BODY_LIMIT
# A LIST through kubeflow.org/v2 arrives as one ConversionReview: kubectl pages by 500, 10 MB of 20 KB MPIJobs.
DEFAULT_MAX_CONVERSION_BODY_BYTES = handlers.DEFAULT_CONVERSION_BODY_LIMIT
DEFAULT_CONVERSION_LIMITS = ConversionLimits()
DEFAULT_MAX_CONVERSION_COST_BYTES = DEFAULT_CONVERSION_LIMITS.cost_bytes
DEFAULT_MAX_CONCURRENT_CONVERSIONS = DEFAULT_CONVERSION_LIMITS.concurrent


def create_app(  # noqa: PLR0913  keyword-only settings, each with its default
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_conversion_body_bytes: int = DEFAULT_MAX_CONVERSION_BODY_BYTES,
    conversions: ConversionLimits = DEFAULT_CONVERSION_LIMITS,
    ready_check: Callable[[], bool] = lambda: True,
    metrics: WebhookMetrics | None = None,
    cluster_domain: str = "",
) -> web.Application:
    """The application with the admission and conversion endpoints, health endpoints and ``/metrics``. Each
    endpoint reads its body against its own limit (413 above it, chunked bodies too, counted while read);
    ``/convert`` and large admission reviews are also refused when their parse cost is over
    ``conversions.cost_bytes``, and take turns, ``conversions.concurrent`` at a time. aiohttp's own
    ``client_max_size`` (for a handler that would read the body whole) is the admission limit.
    ``cluster_domain`` is the reconciler's ``--cluster-domain``: the ConfigMap size that validation checks."""
    app = web.Application(client_max_size=max_body_bytes)
    app[ADMISSION_BODY_LIMIT] = max_body_bytes
    app[CONVERSION_BODY_LIMIT] = max_conversion_body_bytes
    app[CONVERSION_COST_LIMIT] = conversions.cost_bytes
    app[LARGE_REQUEST_GATE] = asyncio.Semaphore(conversions.concurrent)
    app[METRICS] = metrics or WebhookMetrics()
    app[READY_CHECK] = ready_check
    app.router.add_post(MUTATE_PATH, handlers.admission_handler("mutate", admission.mutate))
    app.router.add_post(VALIDATE_PATH, handlers.admission_handler(
        "validate", functools.partial(admission.validate_request, cluster_domain=cluster_domain)))
    app.router.add_post(CONVERT_PATH, handlers.conversion_handler())
    app.router.add_post(POD_INDEX_PATH, handlers.admission_handler("mutate_pod", pod_index.mutate_pod))
    app.router.add_get("/healthz", handlers.healthz)
    app.router.add_get("/readyz", handlers.readyz)
    app.router.add_get("/metrics", handlers.metrics)
    return app
