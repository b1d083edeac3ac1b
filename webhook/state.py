"""Typed keys of what the aiohttp application holds."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web

from webhook.metrics import WebhookMetrics

ReadyCheck = Callable[[], bool]
METRICS = web.AppKey("metrics", WebhookMetrics)
READY_CHECK: web.AppKey[ReadyCheck] = web.AppKey("ready_check")
ADMISSION_BODY_LIMIT = web.AppKey("admission_body_limit", int)  # bytes of an AdmissionReview
CONVERSION_BODY_LIMIT = web.AppKey("conversion_body_limit", int)  # bytes of a ConversionReview
CONVERSION_COST_LIMIT = web.AppKey("conversion_cost_limit", int)  # bytes a ConversionReview may take (parse_cost)
# conversions, and admission reviews of handlers.THREAD_BODY_BYTES or more, read and answered at once
LARGE_REQUEST_GATE = web.AppKey("large_request_gate", asyncio.Semaphore)
