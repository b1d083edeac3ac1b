"""The one module that talks HTTP to the API server: raw JSON over aiohttp, client-side rate limited.

The kubernetes-asyncio generated models are far too slow for bulk pod traffic, so only its
configuration loaders are used (kubeconfig, in-cluster, token refresh); bodies are plain dicts
encoded with orjson.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson

from reconciler.runtime.ratelimit import TokenBucket
from shared.jsondict import JSONDict

USER_AGENT = "mpi-operator"
REQUEST_TIMEOUT = 30.0


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


async def load_configuration(kubeconfig: str = "", master: str = "") -> Any:
    """A kubernetes-asyncio Configuration: from ``kubeconfig`` if given, else in-cluster, else ~/.kube/config."""
    from kubernetes_asyncio import config  # noqa: PLC0415  (slow import, kept out of module load)
    from kubernetes_asyncio.client import Configuration  # noqa: PLC0415

    configuration = Configuration()
    if kubeconfig:
        await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            await config.load_kube_config(client_configuration=configuration)
    if master:
        configuration.host = master
    return configuration


class KubeClient:
    """JSON requests and watches against one API server, sharing a rate limit of ``qps``/``burst``."""

    def __init__(self, configuration: Any, qps: float = 5.0, burst: int = 10) -> None:
        self.configuration = configuration
        self.limiter = TokenBucket(qps, burst)
        self._session: aiohttp.ClientSession | None = None

    def _ssl_context(self) -> ssl.SSLContext:
        cfg = self.configuration
        context = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
        if cfg.cert_file:
            context.load_cert_chain(cfg.cert_file, keyfile=cfg.key_file)
        if not cfg.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self._ssl_context(), limit=64)
            self._session = aiohttp.ClientSession(
                connector=connector, json_serialize=lambda o: orjson.dumps(o).decode(),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            )
        return self._session

    async def _headers(self, content_type: str) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT, "Content-Type": content_type}
        auth = await self.configuration.auth_settings()
        if "BearerToken" in auth:
            headers["Authorization"] = auth["BearerToken"]["value"]
        return headers

    async def request(self, method: str, path: str, body: Any = None, *, params: dict[str, str] | None = None,
                      content_type: str = "application/json") -> JSONDict:
        """One API call; the decoded JSON answer, or ApiError."""
        await self.limiter.acquire()
        data = orjson.dumps(body) if body is not None else None
        async with self.session.request(
            method, self.configuration.host + path, data=data, params=params,
            headers=await self._headers(content_type), timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
        ) as response:
            raw = await response.read()
            if response.status >= 300:
                raise _api_error(response.status, raw)
            decoded: JSONDict = orjson.loads(raw) if raw else {}
            return decoded

    async def watch(self, path: str, params: dict[str, str]) -> AsyncIterator[JSONDict]:
        """The events of one watch request (``watch=1``), until the server closes it."""
        await self.limiter.acquire()
        query = {**params, "watch": "1", "allowWatchBookmarks": "true"}
        async with self.session.get(
            self.configuration.host + path, params=query, headers=await self._headers("application/json"),
            timeout=aiohttp.ClientTimeout(total=None, sock_read=int(params.get("timeoutSeconds", "300")) + 30),
        ) as response:
            if response.status >= 300:
                raise _api_error(response.status, await response.read())
            async for line in response.content:
                if line.strip():
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
