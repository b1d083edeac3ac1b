"""The API client: watch streams of any event size, 429 back-pressure, and configuration errors at start-up as
one line."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from reconciler.runtime.client import (
    ApiError,
    KubeClient,
    keepalive_socket,
    retry_after,
    split_lines,
)

REPO_ROOT = Path(__file__).resolve().parents[3]


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def lines_of(*parts: bytes, limit: int = 1 << 20) -> list[bytes]:
    return [line async for line in split_lines(chunks(*parts), limit=limit)]


async def test_split_lines_across_chunk_boundaries() -> None:
    assert await lines_of(b'{"a":', b'1}\n{"b"', b':2}\n\n', b'{"c":3}') == [b'{"a":1}', b'{"b":2}', b'{"c":3}']


async def test_split_lines_reads_an_event_far_larger_than_aiohttps_line_buffer() -> None:
    big = orjson.dumps({"object": {"data": {"hostfile": "x" * (3 << 20)}}})  # 3 MiB on one line
    pieces = [big[i:i + 65536] for i in range(0, len(big), 65536)]
    assert await lines_of(*pieces, b"\n", b'{"type":"BOOKMARK"}\n', limit=8 << 20) == [big, b'{"type":"BOOKMARK"}']


async def test_split_lines_refuses_a_runaway_line() -> None:
    with pytest.raises(ValueError, match="larger than 1000 bytes"):
        await lines_of(b"x" * 600, b"x" * 600, limit=1000)


@pytest.mark.parametrize(("header", "attempt", "expected"), [
    pytest.param("2", 0, 2.0, id="seconds"),
    pytest.param("3600", 0, 10.0, id="capped"),
    pytest.param(None, 0, 0.1, id="absent: backoff"),
    pytest.param("soon", 3, 0.8, id="unparsable: backoff"),
    pytest.param(None, 20, 5.0, id="backoff capped"),
])
def test_retry_after(header: str | None, attempt: int, expected: float) -> None:
    assert retry_after(header, attempt) == pytest.approx(expected)


class Configuration:
    """The attributes of a kubernetes-asyncio Configuration that KubeClient reads."""

    def __init__(self, host: str) -> None:
        self.host, self.ssl_ca_cert, self.cert_file, self.key_file, self.verify_ssl = host, None, None, None, True

    async def auth_settings(self) -> dict[str, Any]:
        return {}


async def test_429_is_retried_after_retry_after_then_succeeds() -> None:
    answers = [web.Response(status=429, headers={"Retry-After": "0"}, text="{}"),
               web.Response(status=429, headers={"Retry-After": "0"}, text="{}"),
               web.json_response({"kind": "Pod"})]
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(await request.text())
        return answers.pop(0)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/ns/pods", handler)
    async with TestServer(app) as server:
        client = KubeClient(Configuration(str(server.make_url("")).rstrip("/")), qps=0, burst=1)
        try:
            answer = await client.request("POST", "/api/v1/namespaces/ns/pods", {"kind": "Pod"})
        finally:
            await client.close()
    assert answer == {"kind": "Pod"}
    assert seen == ['{"kind":"Pod"}'] * 3
    assert client.throttled == 2


async def test_a_hundred_requests_are_in_flight_at_once_beside_open_watches() -> None:
    """A creation fan-out is never queued behind the process's own connection pool: 3 watches stay open and 100
    requests are all sent before the server answers any (with a pool of 64 connections shared with the watches,
    the last ones waited for a connection and a request could starve past its timeout: issue 36)."""
    arrived, everyone = 0, asyncio.Event()
    requests = 100

    async def create(_: web.Request) -> web.Response:
        nonlocal arrived
        arrived += 1
        if arrived == requests:
            everyone.set()
        await everyone.wait()
        return web.json_response({"kind": "Pod"}, status=201)

    async def watch(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await everyone.wait()
        return response

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/ns/pods", create)
    app.router.add_get("/api/v1/pods", watch)
    async with TestServer(app) as server:
        client = KubeClient(Configuration(str(server.make_url("")).rstrip("/")), qps=0, burst=1)

        async def follow() -> list[Any]:
            return [event async for event in client.watch("/api/v1/pods", {})]

        try:
            async with asyncio.timeout(20):
                watches = [asyncio.create_task(follow()) for _ in range(3)]
                answers = await asyncio.gather(*(client.request("POST", "/api/v1/namespaces/ns/pods", {"kind": "Pod"})
                                                  for _ in range(requests)))
                assert await asyncio.gather(*watches) == [[], [], []]
        finally:
            await client.close()
    assert answers == [{"kind": "Pod"}] * requests
    assert arrived == requests


async def test_429_gives_up_after_the_retry_budget() -> None:
    async def handler(_: web.Request) -> web.Response:
        return web.json_response({"reason": "TooManyRequests", "message": "slow down"}, status=429,
                                 headers={"Retry-After": "0"})

    app = web.Application()
    app.router.add_get("/api/v1/pods", handler)
    async with TestServer(app) as server:
        client = KubeClient(Configuration(str(server.make_url("")).rstrip("/")), qps=0, burst=1)
        try:
            with pytest.raises(ApiError) as raised:
                await client.request("GET", "/api/v1/pods")
        finally:
            await client.close()
    assert raised.value.status == 429
    assert raised.value.reason == "TooManyRequests"


def run_reconciler(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reconciler", *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO_ROOT, env=env, check=False)


KUBECONFIG_NO_CONTEXT = "apiVersion: v1\nkind: Config\nclusters: []\n"


@pytest.mark.parametrize(("content", "message"), [
    pytest.param(None, "kubeconfig {path}: no such file", id="missing file"),
    pytest.param("garbage: [", "kubeconfig {path} is not usable: while parsing a flow node", id="not YAML"),
    pytest.param(KUBECONFIG_NO_CONTEXT, "kubeconfig {path} is not usable: it names no current-context",
                 id="no current-context"),
])  # an unreachable API server is waited for instead (test_startup.py)
def test_start_up_errors_are_one_line(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    result = run_reconciler(f"--kubeConfig={path}")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("python -m reconciler: error: " + message.format(path=path)), lines[0]


def test_no_kubeconfig_outside_a_cluster(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    result = run_reconciler(env=env)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"python -m reconciler: error: no kubeconfig: pass --kubeConfig or set KUBECONFIG ({tmp_path}/.kube/config "
        "does not exist), or run in a cluster (KUBERNETES_SERVICE_HOST is not set)")


def test_api_connections_probe_a_silent_peer_within_a_minute() -> None:
    sock = keepalive_socket((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", 1)))
    try:
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        if hasattr(socket, "TCP_KEEPIDLE"):
            probes = [sock.getsockopt(socket.IPPROTO_TCP, getattr(socket, name))
                      for name in ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT")]
            assert probes == [30, 10, 3]
    finally:
        sock.close()
