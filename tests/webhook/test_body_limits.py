"""Each route reads its body against its own limit, chunked bodies counted while they are read; /convert refuses a
review whose parse cost is over its limit, converts one review at a time, and converts a large one in a thread
while /healthz keeps answering (webhook/limits.py, webhook/handlers.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any, Literal

import orjson
import pytest
from aiohttp import web
from prometheus_client import generate_latest

from shared.api import constants as c
from tests.webhook.conftest import Client, review
from tests.webhook.test_admission_http import big_job, minimal
from tests.webhook.test_conversion_http import UID, conversion_review, converted, v2_job
from webhook import admission, handlers
from webhook.app import CONVERT_PATH, MUTATE_PATH, VALIDATE_PATH, create_app
from webhook.limits import COST_PER_BYTE, COST_PER_CONTAINER, COST_PER_STRING, ConversionLimits, parse_cost
from webhook.metrics import WebhookMetrics
from webhook.state import LARGE_REQUEST_GATE, METRICS

MiB = 1024 * 1024
HEADERS = {"Content-Type": "application/json"}


async def chunked(body: bytes, chunk: int = 64 * 1024) -> AsyncIterator[bytes]:
    """``body`` as a chunked request sends it: no Content-Length."""
    for start in range(0, len(body), chunk):
        yield body[start:start + chunk]


async def post_chunked(client: Client, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    resp = await client.post(path, data=chunked(body), headers=HEADERS)
    assert resp.headers["Content-Type"] == "application/json"
    return resp.status, orjson.loads(await resp.read())


@pytest.mark.parametrize("path", [MUTATE_PATH, VALIDATE_PATH])
async def test_a_chunked_admission_body_over_the_limit_gets_413(client: Client, path: str) -> None:
    body = orjson.dumps(review(big_job(9 * MiB)))
    status, answer = await post_chunked(client, path, body)
    assert (status, answer["reason"], answer["message"]) == (
        413, "RequestEntityTooLarge",
        "request body too large for the MPIJob webhook: Maximum request body size 8388608 exceeded.")


async def test_a_chunked_admission_body_under_the_limit_is_admitted(client: Client) -> None:
    status, answer = await post_chunked(client, VALIDATE_PATH, orjson.dumps(review(big_job(7 * MiB))))
    assert (status, answer["response"]) == (200, {"uid": "0d5c4e1a-7b2f-4f55-9a53-1f4c7d9f0001", "allowed": True})


async def test_the_admission_limit_is_not_raised_by_the_conversion_limit(aiohttp_client: Any) -> None:
    """Every route has its own limit: a body the conversion route would take is refused by admission."""
    client = await aiohttp_client(create_app(max_body_bytes=1 * MiB, max_conversion_body_bytes=64 * MiB))
    status, answer = await post_chunked(client, VALIDATE_PATH, orjson.dumps(review(big_job(2 * MiB))))
    assert (status, answer["message"]) == (
        413, "request body too large for the MPIJob webhook: Maximum request body size 1048576 exceeded.")


async def test_a_chunked_conversion_body_over_the_limit_gets_413(aiohttp_client: Any) -> None:
    client = await aiohttp_client(create_app(max_conversion_body_bytes=1 * MiB))
    body = orjson.dumps(conversion_review(c.API_VERSION, [{**v2_job(), "padding": "x" * (2 * MiB)}]))
    status, answer = await post_chunked(client, CONVERT_PATH, body)
    assert (status, answer["response"]) == (413, {"uid": "", "result": {
        "status": "Failed",
        "message": "request body too large for the MPIJob webhook: Maximum request body size 1048576 exceeded."}})


async def test_a_chunked_conversion_body_under_the_limit_converts(client: Client) -> None:
    status, answer = await post_chunked(client, CONVERT_PATH, orjson.dumps(conversion_review(c.API_VERSION_V2,
                                                                                              [v2_job()])))
    assert (status, answer) == (200, converted([v2_job()]))


@pytest.mark.parametrize(("body", "containers", "strings"), [
    pytest.param(b"", 0, 0, id="empty"),
    pytest.param(b'{"a":[{},{}],"b":"x{"}', 5, 3, id="braces-in-strings-count"),
    pytest.param(b"[1000,1000]", 1, 0, id="numbers"),
])
def test_parse_cost(body: bytes, containers: int, strings: int) -> None:
    assert parse_cost(body) == COST_PER_BYTE * len(body) + COST_PER_CONTAINER * containers + COST_PER_STRING * strings


async def test_a_review_over_the_cost_limit_gets_413_before_it_is_parsed(aiohttp_client: Any) -> None:
    """A small body of many empty objects costs far more memory than its size: refused by its parse cost."""
    body = orjson.dumps(conversion_review(c.API_VERSION, [{**v2_job(), "spec": {"x": [{}] * 100_000}}]))
    cost = parse_cost(body)
    client = await aiohttp_client(create_app(conversions=ConversionLimits(cost_bytes=cost - 1)))
    status, answer = await post_chunked(client, CONVERT_PATH, body)
    assert (status, answer["response"]["result"]) == (413, {"status": "Failed", "message": (
        f"request body too large for the MPIJob webhook: a ConversionReview of {len(body)} bytes may take up to "
        f"{cost} bytes of memory to convert, over the webhook's limit of {cost - 1} (--max-conversion-cost-bytes)")})
    client = await aiohttp_client(create_app(conversions=ConversionLimits(cost_bytes=cost)))
    status, answer = await post_chunked(client, CONVERT_PATH, body)
    assert (status, answer["response"]["result"]) == (200, {"status": "Success"})


async def test_every_failed_answer_counts_as_a_conversion_failure(aiohttp_client: Any) -> None:
    """A 400 or a 413 fails the API server's request just as a Failed result does: MPIJobConversionFailures sees
    them all."""
    app = create_app(max_conversion_body_bytes=1 * MiB)
    client = await aiohttp_client(app)
    too_large = orjson.dumps(conversion_review(c.API_VERSION, [{**v2_job(), "padding": "x" * (2 * MiB)}]))
    for body, status in ((b"{", 400), (too_large, 413), (orjson.dumps(conversion_review(c.API_VERSION, [1])), 200),
                         (orjson.dumps(conversion_review(c.API_VERSION_V2, [v2_job()])), 200)):
        assert (await client.post(CONVERT_PATH, data=body, headers=HEADERS)).status == status
    scrape = generate_latest(app[METRICS].registry).decode().splitlines()
    assert "mpijob_webhook_conversion_failures_total 3.0" in scrape


class WatchedGate(asyncio.Semaphore):
    """A semaphore that counts the requests that had to wait for it."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.waited = 0
        self.changed = asyncio.Event()

    async def acquire(self) -> Literal[True]:
        if self.locked():
            self.waited += 1
            self.changed.set()
        return await super().acquire()

    async def waiting(self, count: int) -> None:
        async with asyncio.timeout(30):
            while self.waited < count:
                self.changed.clear()
                await self.changed.wait()


def blocking_app(release: threading.Event, entered: threading.Event, concurrent: int,
                 gate: asyncio.Semaphore | None = None) -> tuple[web.Application, list[int]]:
    """/convert and /healthz, with a conversion that waits for ``release`` (set ``entered`` on the way in) and
    records how many conversions run at once."""
    running: list[int] = [0]
    most: list[int] = []
    lock = threading.Lock()

    def convert(request: dict[str, Any]) -> tuple[dict[str, Any], int]:
        with lock:
            running[0] += 1
            most.append(running[0])
        entered.set()
        assert release.wait(30), "the test never released the conversion"
        with lock:
            running[0] -= 1
        return converted([], uid=request["uid"]), -1

    app = web.Application()
    app[METRICS] = WebhookMetrics()
    app[LARGE_REQUEST_GATE] = gate or asyncio.Semaphore(concurrent)
    app.router.add_post(CONVERT_PATH, handlers.conversion_handler(convert))
    app.router.add_post(VALIDATE_PATH, handlers.admission_handler("validate", admission.validate_request))
    app.router.add_get("/healthz", handlers.healthz)
    return app, most


def large_review(uid: str = UID) -> bytes:
    """A review converted in a thread (at least handlers.THREAD_BODY_BYTES)."""
    body = orjson.dumps(conversion_review(c.API_VERSION, [minimal(f"job-{i}") for i in range(2000)], uid=uid))
    assert len(body) >= handlers.THREAD_BODY_BYTES
    return body


async def test_healthz_answers_while_a_large_review_converts(aiohttp_client: Any) -> None:
    release, entered = threading.Event(), threading.Event()
    app, _ = blocking_app(release, entered, concurrent=1)
    client = await aiohttp_client(app)
    converting = asyncio.create_task(client.post(CONVERT_PATH, data=large_review(), headers=HEADERS))
    try:
        assert await asyncio.to_thread(entered.wait, 30)
        health = await asyncio.wait_for(client.get("/healthz"), 10)
        assert (health.status, await health.text(), converting.done()) == (200, "ok", False)
    finally:
        release.set()
    resp = await converting
    assert (resp.status, orjson.loads(await resp.read())) == (200, converted([]))


async def test_conversions_wait_for_the_gate_in_turn(aiohttp_client: Any) -> None:
    release, entered = threading.Event(), threading.Event()
    app, most = blocking_app(release, entered, concurrent=1)
    client = await aiohttp_client(app)
    uids = [f"uid-{i}" for i in range(3)]
    posts = [asyncio.create_task(client.post(CONVERT_PATH, data=large_review(uid), headers=HEADERS)) for uid in uids]
    assert await asyncio.to_thread(entered.wait, 30)
    release.set()
    answers = [orjson.loads(await (await task).read()) for task in posts]
    assert [answer["response"]["uid"] for answer in answers] == uids
    assert most == [1, 1, 1], "one conversion at a time"


async def test_a_body_sent_too_slowly_gets_408_and_frees_the_gate(aiohttp_client: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The body is read while the conversion holds the gate: a client that stops sending must not keep the others
    waiting past the API server's own timeout."""
    monkeypatch.setattr(handlers, "CONVERSION_READ_SECONDS", 0.2)
    client = await aiohttp_client(create_app())
    stalled = asyncio.Event()

    async def stalling() -> AsyncIterator[bytes]:
        yield b'{"apiVersion":'
        await stalled.wait()

    try:
        resp = await asyncio.wait_for(client.post(CONVERT_PATH, data=stalling(), headers=HEADERS), 10)
        assert (resp.status, orjson.loads(await resp.read())["response"]) == (408, {"uid": "", "result": {
            "status": "Failed", "message": "request body not received within 0.2 s"}})
    finally:
        stalled.set()
    resp = await client.post(CONVERT_PATH, data=orjson.dumps(conversion_review(c.API_VERSION_V2, [v2_job()])),
                             headers=HEADERS)
    assert (resp.status, orjson.loads(await resp.read())) == (200, converted([v2_job()]))


async def test_a_large_admission_review_waits_for_its_turn_and_a_small_one_does_not(aiohttp_client: Any) -> None:
    """Large bodies (handlers.THREAD_BODY_BYTES or more, or chunked) share the conversions' gate: never two parsed at
    once. The API server's usual reviews are small and answered at once."""
    release, entered, gate = threading.Event(), threading.Event(), WatchedGate(1)
    app, _ = blocking_app(release, entered, concurrent=1, gate=gate)
    client = await aiohttp_client(app)
    converting = asyncio.create_task(client.post(CONVERT_PATH, data=large_review(), headers=HEADERS))
    large = orjson.dumps(review(big_job(handlers.THREAD_BODY_BYTES)))
    assert len(large) >= handlers.THREAD_BODY_BYTES
    try:
        assert await asyncio.to_thread(entered.wait, 30)
        waiting = [asyncio.create_task(client.post(VALIDATE_PATH, data=large, headers=HEADERS)),
                   asyncio.create_task(client.post(VALIDATE_PATH, data=chunked(orjson.dumps(review(minimal()))),
                                                   headers=HEADERS))]
        await gate.waiting(2)  # the large and the chunked review, both unread
        small = await asyncio.wait_for(client.post(VALIDATE_PATH, data=orjson.dumps(review(minimal())),
                                                   headers=HEADERS), 10)
        assert (small.status, gate.waited, [task.done() for task in waiting]) == (200, 2, [False, False])
    finally:
        release.set()
    assert (await converting).status == 200
    uid = "0d5c4e1a-7b2f-4f55-9a53-1f4c7d9f0001"
    for task in waiting:
        resp = await task
        assert (resp.status, orjson.loads(await resp.read())["response"]) == (200, {"uid": uid, "allowed": True})
