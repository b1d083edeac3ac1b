"""HTTP handlers: read the body, call the pure admission functions, answer, count and log.

Every request gets exactly one answer and one canonical log line. A body that is not an
AdmissionReview gets 400, one over the size limit 413, and an unexpected failure 500 with the
request uid: never an accidental allow.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from shared.api import shown
from webhook import admission, conversion
from webhook.limits import parse_cost, read_limited
from webhook.state import (
    ADMISSION_BODY_LIMIT,
    CONVERSION_BODY_LIMIT,
    CONVERSION_COST_LIMIT,
    LARGE_REQUEST_GATE,
    METRICS,
    READY_CHECK,
)

logger = logging.getLogger("webhook")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
AdmitFunction = Callable[[dict[str, Any]], admission.Admission]
# Without the application's own limits (an application built around a handler alone): create_app's defaults
DEFAULT_ADMISSION_BODY_LIMIT = 8 * 1024 * 1024
DEFAULT_CONVERSION_BODY_LIMIT = 32 * 1024 * 1024


# Bodies from this size up (and chunked ones) are read and answered in turn with the conversions (LARGE_REQUEST_GATE),
# and decoded, handled and encoded in a thread, so that the event loop keeps answering /healthz, /readyz and small
# admission reviews meanwhile (orjson holds the GIL only while it decodes or encodes).
THREAD_BODY_BYTES = 256 * 1024
# A body read while its request holds the gate and has not arrived in full by the time the API server gives up on
# the call (30 s for a conversion; admission: the configurations' 5 s, and some room) gets 408, so that a client
# sending slowly cannot keep the others waiting.
CONVERSION_READ_SECONDS = 30.0
ADMISSION_READ_SECONDS = 10.0
_JSON_HEADERS = {"Content-Type": "application/json"}  # as content_type= sets it, without parsing it per answer


def _status_body(code: int, reason: str, message: str) -> bytes:
    return orjson.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                         "reason": reason, "code": code})


def admission_handler(operation: str, admit: AdmitFunction) -> Handler:
    """An aiohttp handler answering AdmissionReviews with ``admit``."""

    async def handle(request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        log: dict[str, Any] = {"op": operation, "uid": ""}
        response, result = await _answer(request, admit, log)
        seconds = time.perf_counter() - started
        request.app[METRICS].observe(operation, result, seconds)
        if "skipped" in log:
            request.app[METRICS].replica_index_skipped.labels(log["skipped"]).inc()
        log.update(result=result, duration_us=round(seconds * 1e6))
        logger.info("admission", extra={"kv": log})
        return response

    return handle


async def _answer(request: web.Request, admit: AdmitFunction, log: dict[str, Any]) -> tuple[web.Response, str]:
    length = request.content_length
    if length is not None and length < THREAD_BODY_BYTES:  # the API server's usual review: read and answered now
        return await _read_and_answer(request, _ADMISSION, None, partial(_admit_body, admit=admit, log=log), log)
    # A large or chunked review takes its turn with the conversions (LARGE_REQUEST_GATE): one large body parsed at
    # a time, so that two of them never add up past the memory limit.
    gate = request.app.get(LARGE_REQUEST_GATE)
    async with gate if gate is not None else contextlib.nullcontext():
        return await _read_and_answer(request, _ADMISSION, ADMISSION_READ_SECONDS,
                                      partial(_admit_body, admit=admit, log=log), log)


@dataclass(frozen=True)
class _Endpoint:
    """What differs between reading an AdmissionReview and a ConversionReview."""

    review: str  # the body's kind, with its article, for messages
    verb: str  # what the webhook does with it, for messages
    body_limit: web.AppKey[int]
    default_body_limit: int
    cost_checked_from: int  # bytes of body from which its parse cost is checked
    error_body: Callable[[int, str, str], bytes]  # the encoded answer of an HTTP error, from code, reason, message

    def refused(self, code: int, reason: str, message: str) -> web.Response:
        return web.Response(body=self.error_body(code, reason, message), status=code, headers=_JSON_HEADERS)


_ADMISSION = _Endpoint("an AdmissionReview", "admit", ADMISSION_BODY_LIMIT, DEFAULT_ADMISSION_BODY_LIMIT,
                       THREAD_BODY_BYTES, _status_body)
_CONVERSION = _Endpoint("a ConversionReview", "convert", CONVERSION_BODY_LIMIT, DEFAULT_CONVERSION_BODY_LIMIT, 0,
                        lambda code, reason, message: orjson.dumps(conversion.bad_review(message)))


async def _read_and_answer(request: web.Request, endpoint: _Endpoint, read_seconds: float | None,
                           answer_body: Callable[[bytes], tuple[int, bytes, str]],
                           log: dict[str, Any]) -> tuple[web.Response, str]:
    """Read the body within ``read_seconds`` and the endpoint's limits (413 above its size or parse cost, 408 when
    it does not arrive in time) and answer it with ``answer_body``, in a thread from THREAD_BODY_BYTES up."""
    try:
        async with asyncio.timeout(read_seconds):
            body = await read_limited(request, request.app.get(endpoint.body_limit, endpoint.default_body_limit))
    except web.HTTPRequestEntityTooLarge as error:
        message = f"request body too large for the MPIJob webhook: {error.text or ''}"
        return endpoint.refused(413, "RequestEntityTooLarge", message), "too_large"
    except TimeoutError:
        log["error"] = f"request body not received within {read_seconds:g} s"
        return endpoint.refused(408, "Timeout", log["error"]), "bad_request"
    cost_limit = request.app.get(CONVERSION_COST_LIMIT)
    if (cost_limit is not None and len(body) >= endpoint.cost_checked_from
            and (cost := parse_cost(body)) > cost_limit):
        log["cost"] = cost
        message = (f"request body too large for the MPIJob webhook: {endpoint.review} of {len(body)} bytes may take "
                   f"up to {cost} bytes of memory to {endpoint.verb}, over the webhook's limit of {cost_limit} "
                   "(--max-conversion-cost-bytes)")
        return endpoint.refused(413, "RequestEntityTooLarge", message), "too_large"
    if len(body) < THREAD_BODY_BYTES:
        status, answer, result = answer_body(body)
    else:
        status, answer, result = await asyncio.to_thread(answer_body, body)
    return web.Response(body=answer, status=status, headers=_JSON_HEADERS), result


def _admit_body(body: bytes, admit: AdmitFunction, log: dict[str, Any]) -> tuple[int, bytes, str]:
    """The HTTP status, encoded answer and result of an AdmissionReview body (no I/O: run in a thread for a large
    one); fills ``log``."""
    try:
        review_request = admission.parse_review(body)
    except admission.BadReviewError as error:
        log["error"] = str(error)
        return 400, _status_body(400, "BadRequest", str(error)), "bad_request"
    uid = review_request["uid"]
    log.update(admission.log_fields(review_request), dry_run=bool(review_request.get("dryRun")))
    try:
        answer = admit(review_request)
    except Exception:
        logger.exception("admission failed", extra={"kv": {"uid": log["uid"]}})
        message = f"internal error in the MPIJob webhook while admitting request {log['uid']}; see the webhook's log"
        return 500, orjson.dumps(admission.errored(uid, 500, message)), "error"
    if answer.patch_ops:
        log["patch_ops"] = answer.patch_ops
    if answer.errors:
        log["errors"] = len(answer.errors)
    if answer.skipped:
        log["skipped"] = answer.skipped
    return 200, orjson.dumps(answer.review()), answer.outcome


ConvertFunction = Callable[[dict[str, Any]], tuple[dict[str, Any], int]]


def conversion_handler(convert: ConvertFunction = conversion.convert_review) -> Handler:
    """An aiohttp handler answering ConversionReviews (``POST /convert``): 200 with Success or Failed, 400 for a
    body that is not a ConversionReview, 408 for one not received within CONVERSION_READ_SECONDS, 413 above the
    size limit or the parse-cost limit; an unexpected error is a Failed result. At most the application's
    LARGE_REQUEST_GATE of them are read and answered at once; the others wait, their bodies unread, in the order
    they came."""

    async def handle(request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        log: dict[str, Any] = {"op": "convert", "uid": ""}
        gate = request.app.get(LARGE_REQUEST_GATE)
        async with gate if gate is not None else contextlib.nullcontext():
            if gate is not None:
                log["waited_us"] = round((time.perf_counter() - started) * 1e6)
            response, result = await _read_and_answer(request, _CONVERSION, CONVERSION_READ_SECONDS,
                                                      partial(_convert_body, convert=convert, log=log), log)
        seconds = time.perf_counter() - started
        request.app[METRICS].observe("convert", result, seconds)
        if result != "converted":  # every answer but Success says Failed, and fails the API server's request
            request.app[METRICS].conversion_failures.inc()
        log.update(result=result, duration_us=round(seconds * 1e6))
        logger.info("conversion", extra={"kv": log})
        return response

    return handle


def _convert_body(body: bytes, convert: ConvertFunction, log: dict[str, Any]) -> tuple[int, bytes, str]:
    """The HTTP status, encoded answer and result of a ConversionReview body (no I/O: run in a thread for a large
    one); fills ``log``."""
    try:
        review_request = conversion.parse_conversion_review(body)
    except admission.BadReviewError as error:
        log["error"] = str(error)
        return 400, orjson.dumps(conversion.bad_review(str(error))), "bad_request"
    uid = review_request["uid"]
    log.update(uid=admission.log_fields({"uid": uid, "operation": ""})["uid"],
               desired=shown.identifier(review_request["desiredAPIVersion"]),
               objects=len(review_request["objects"]))
    try:
        answer, failed_index = convert(review_request)
    except Exception:  # the conversion is total over JSON; should it not be, the API server gets a Failed result
        logger.exception("conversion failed", extra={"kv": {"uid": log["uid"]}})
        message = f"internal error in the MPIJob webhook while converting request {log['uid']}; see the webhook's log"
        return 200, orjson.dumps(conversion.failed_review(uid, message)), "error"
    if failed_index >= 0:
        log["error"] = answer["response"]["result"]["message"][:200]
        return 200, orjson.dumps(answer), "failed"
    return 200, orjson.dumps(answer), "converted"


async def healthz(request: web.Request) -> web.Response:
    """Liveness: the event loop answers."""
    return web.Response(text="ok")


async def readyz(request: web.Request) -> web.Response:
    """Readiness: a serving certificate is loaded."""
    if request.app[READY_CHECK]():
        return web.Response(text="ok")
    return web.Response(text="no serving certificate loaded yet", status=503)


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[METRICS].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
