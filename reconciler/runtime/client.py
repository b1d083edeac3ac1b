"""The one module that talks HTTP to the API server: raw JSON over aiohttp, client-side rate limited.

The kubernetes-asyncio generated models are far too slow for bulk pod traffic, so only its
configuration loaders are used (kubeconfig, in-cluster, token refresh); bodies are plain dicts
encoded with orjson.
"""

from __future__ import annotations

import asyncio
import os
import platform
import socket
import ssl
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import aiohttp
import orjson

from reconciler.runtime.ratelimit import TokenBucket
from shared.jsondict import JSONDict

USER_AGENT = "mpi-operator"  # then "/<version> (<os>/<arch>) pid/<pid>", as client-go's agent names its binary


def user_agent(version: str = "0.1.0") -> str:
    """``mpi-operator/0.1.0 (linux/x86_64) pid/42``: the process id tells replicas apart in an audit log."""
    return f"{USER_AGENT}/{version} ({platform.system().lower()}/{platform.machine()}) pid/{os.getpid()}"
REQUEST_TIMEOUT = 30.0  # seconds the API server may stay silent on a request it was sent (not queueing here)
TEXT_TIMEOUT = 5.0  # get_text
MAX_THROTTLE_RETRIES = 10
MAX_EVENT_BYTES = 64 << 20  # a watch event larger than this is a broken stream, not an object


# The API server's silence is timed, not the request's whole life: a total timeout also counts the time a request
# waits for a connection, so a busy process (a 10,000-worker creation) failed syncs with a client TimeoutError.
REQUEST_TIMEOUTS = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=REQUEST_TIMEOUT)


class ApiError(Exception):
    """A non-2xx answer of the API server, classified by status code and Status reason."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message = status, reason, message

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def conflict(self) -> bool:
        return self.status == 409 and self.reason != "AlreadyExists"

    @property
    def gone(self) -> bool:
        return self.status == 410


class StartupError(Exception):
    """The process cannot start: a message for the user, printed as one line."""


class KubeClient:
    """JSON requests and watches against one API server, sharing a rate limit of ``qps``/``burst``."""

    def __init__(self, configuration: Any, qps: float = 5.0, burst: int = 10) -> None:
        self.configuration = configuration
        self.limiter = TokenBucket(qps, burst)
        self._session: aiohttp.ClientSession | None = None
        self.throttled = 0  # 429 answers retried
        self.user_agent = user_agent()

    def _ssl_context(self) -> ssl.SSLContext:
        cfg = self.configuration
        context = ssl.create_default_context(cafile=cfg.ssl_ca_cert, cadata=getattr(cfg, "ca_data", None))
        if cfg.cert_file:
            context.load_cert_chain(cfg.cert_file, keyfile=cfg.key_file)
        if not cfg.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            # No cap on connections: what bounds them is the writes semaphore, the sync workers and the watches.
            # A cap shared with the watches (which hold a connection each) left creates queued for a free one,
            # and a request queued that way could starve past its timeout while the others reused theirs.
            connector = aiohttp.TCPConnector(ssl=self._ssl_context(), limit=0, socket_factory=keepalive_socket)
            self._session = aiohttp.ClientSession(
                connector=connector, json_serialize=lambda o: orjson.dumps(o).decode(),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            )
        return self._session

    async def _headers(self, content_type: str) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": self.user_agent, "Content-Type": content_type}
        auth = await self.configuration.auth_settings()
        if "BearerToken" in auth:
            headers["Authorization"] = auth["BearerToken"]["value"]
        return headers

    async def request(self, method: str, path: str, body: Any = None, *, params: dict[str, str] | None = None,
                      content_type: str = "application/json") -> JSONDict:
        """One API call; the decoded JSON answer, or ApiError. A 429 (the API server's Priority and Fairness
        pushing back) is retried after its Retry-After, at most ``MAX_THROTTLE_RETRIES`` times, as client-go does."""
        data = orjson.dumps(body) if body is not None else None
        for attempt in range(MAX_THROTTLE_RETRIES + 1):
            await self.limiter.acquire()
            async with self.session.request(
                method, self.configuration.host + path, data=data, params=params,
                headers=await self._headers(content_type), timeout=REQUEST_TIMEOUTS,
            ) as response:
                raw = await response.read()
                if response.status == 429 and attempt < MAX_THROTTLE_RETRIES:
                    self.throttled += 1
                    await asyncio.sleep(retry_after(response.headers.get("Retry-After"), attempt))
                    continue
                if response.status >= 300:
                    raise _api_error(response.status, raw)
                decoded: JSONDict = orjson.loads(raw) if raw else {}
                return decoded
        raise AssertionError("unreachable")  # the last attempt returns or raises

    async def get_text(self, path: str) -> tuple[int, str]:
        """GET a plain-text endpoint of the API server (``/readyz``): its status and body, whatever the status.
        Not rate limited: it is asked only while deciding whether to wait for the API server."""
        async with self.session.get(
            self.configuration.host + path, headers=await self._headers("text/plain"),
            timeout=aiohttp.ClientTimeout(total=TEXT_TIMEOUT),
        ) as response:
            return response.status, (await response.read()).decode(errors="replace")

    async def watch(self, path: str, params: dict[str, str]) -> AsyncIterator[JSONDict]:
        """The events of one watch request (``watch=1``), until the server closes it. Events are split on
        newlines by ``split_lines``, so an event of any size the cluster can store is read whole."""
        await self.limiter.acquire()
        query = {**params, "watch": "1", "allowWatchBookmarks": "true"}
        async with self.session.get(
            self.configuration.host + path, params=query, headers=await self._headers("application/json"),
            timeout=aiohttp.ClientTimeout(total=None, sock_read=int(params.get("timeoutSeconds", "300")) + 30),
        ) as response:
            if response.status >= 300:
                raise _api_error(response.status, await response.read())
            async for line in split_lines(response.content.iter_any()):
                yield orjson.loads(line)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _api_error(status: int, raw: bytes) -> ApiError:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return ApiError(status, "", raw.decode(errors="replace")[:500])
    if not isinstance(body, dict):
        return ApiError(status, "", str(body)[:500])
    return ApiError(status, str(body.get("reason") or ""), str(body.get("message") or ""))


def keepalive_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """A TCP socket whose keepalive probes start after 30 s of silence (3 probes, 10 s apart): a watch whose
    connection died silently (a NAT or load balancer forgot it) fails within about a minute and is resumed,
    instead of waiting for its read timeout. client-go gets the same from HTTP/2 pings."""
    family, kind, proto = addr_info[0], addr_info[1], addr_info[2]
    sock = socket.socket(family=family, type=kind, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, option):  # Linux; other systems keep their defaults
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
    return sock


def retry_after(header: str | None, attempt: int) -> float:
    """Seconds to wait after a 429: the Retry-After header (capped), else an exponential backoff."""
    try:
        seconds = float(header) if header else 0.0
    except ValueError:
        seconds = 0.0
    return min(seconds, 10.0) if seconds > 0 else min(0.1 * 2**attempt, 5.0)


async def split_lines(chunks: AsyncIterable[bytes], limit: int = MAX_EVENT_BYTES) -> AsyncIterator[bytes]:
    """The non-empty newline-terminated lines of a byte stream, whatever their size up to ``limit``
    (aiohttp's own line reader refuses lines over its buffer size)."""
    buffer = bytearray()
    async for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            buffer += chunk[start:end]
            if buffer.strip():
                yield bytes(buffer)
            buffer.clear()
            start = end + 1
        buffer += chunk[start:]
        if len(buffer) > limit:
            raise ValueError(f"a watch event is larger than {limit} bytes")
    if buffer.strip():
        yield bytes(buffer)
