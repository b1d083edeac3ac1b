"""A closed-loop load generator against the API server (asyncio, aiohttp, orjson, admin client cert)."""

from __future__ import annotations

import asyncio
import ssl
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson


@dataclass
class Latencies:
    seconds: list[float]
    errors: int
    wall: float

    def pct(self, p: float) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] * 1000

    @property
    def p50(self) -> float:
        return self.pct(50)

    @property
    def p99(self) -> float:
        return self.pct(99)

    @property
    def rate(self) -> float:
        return len(self.seconds) / self.wall if self.wall else 0.0

    def summary(self) -> str:
        return (f"n={len(self.seconds)} p50={self.p50:.2f}ms p99={self.p99:.2f}ms mean="
                f"{statistics.fmean(self.seconds) * 1000:.2f}ms rate={self.rate:.0f}/s errors={self.errors}")


class ApiLoad:
    def __init__(self, server: str, ca: Path, cert: Path, key: Path) -> None:
        self.server = server
        self.context = ssl.create_default_context(cafile=str(ca))
        self.context.load_cert_chain(str(cert), str(key))
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ApiLoad:
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.context, limit=256))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.session is not None:
            await self.session.close()

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        assert self.session is not None
        data = orjson.dumps(body) if body is not None else None
        async with self.session.request(method, self.server + path, data=data,
                                        headers={"Content-Type": "application/json"}) as response:
            raw = await response.read()
            return response.status, orjson.loads(raw) if raw else None

    async def closed_loop(self, path: str, make_body: Callable[[int], Any], count: int, clients: int) -> Latencies:
        """``count`` POSTs to ``path`` by ``clients`` concurrent clients, each waiting for its answer."""
        next_index = 0
        seconds: list[float] = []
        errors = 0

        async def client() -> None:
            nonlocal next_index, errors
            while next_index < count:
                index = next_index
                next_index += 1
                started = time.perf_counter()
                status, answer = await self.request("POST", path, make_body(index))
                if status >= 300:
                    errors += 1
                    if errors == 1:
                        print(f"first error: {status} {answer}")
                else:
                    seconds.append(time.perf_counter() - started)

        began = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return Latencies(seconds, errors, time.perf_counter() - began)
