"""Waiting for the API server at start-up instead of exiting.

An API server that is down, restarting, unreachable or not ready yet is waited for: one probe per attempt,
attempts spaced by a capped exponential back-off with jitter (``Backoff``: 0.5 s doubling to 8 s, each delay
drawn within 20 % of its nominal value, so that replicas restarted together do not probe in step), one log
line per failed attempt, and the reason served by ``/readyz`` (``ApiWait.problem``) while ``/healthz`` stays
healthy: a liveness probe must not restart a process for an outage that a restart cannot fix, and a process
that exited instead would be held back by kubelet's crash-loop back-off (up to 5 minutes) after the API
server is back.

What is not transient still ends the wait at once, so that a misconfiguration fails loudly instead of
idling: ``transient_reason`` returns None for it and the caller raises its own error. A refusal (401/403) or
a resource not served (404) counts as transient only while the API server itself says it is not ready
(``/readyz``): a freshly started API server answers requests before its authorizer's caches and the CRDs it
serves are loaded. A certificate that does not verify, an invalid URL and any other 4xx are never transient.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp

from reconciler.runtime.client import ApiError, KubeClient

logger = logging.getLogger("reconciler.startup")
PROBE_TIMEOUT = 10.0  # one attempt; a hung API server counts as unreachable after this
_MESSAGE_LIMIT = 300


@dataclass(frozen=True)
class Backoff:
    """Capped exponential back-off with jitter: the wait after attempt ``n`` (1-based) is
    ``min(cap, initial * factor**(n-1))`` times a factor drawn from ``[1 - jitter, 1 + jitter]``."""

    initial: float = 0.5
    factor: float = 2.0
    cap: float = 8.0
    jitter: float = 0.2

    def delay(self, attempt: int, draw: Callable[[], float] = random.random) -> float:
        nominal = min(self.cap, self.initial * self.factor ** max(attempt - 1, 0))
        return nominal * (1 + self.jitter * (2 * draw() - 1))


class Unavailable(Exception):  # noqa: N818  (a state worth waiting out, not an error)
    """The API server cannot answer now, for a reason worth waiting out (the message)."""


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "..."


async def readyz_problem(client: KubeClient) -> str | None:
    """Why the API server says it is not ready, from its ``/readyz`` (the checks it lists as failed), or None
    when it says it is ready or cannot tell (``/readyz`` refused or not served: its answers are then taken as
    they are)."""
    try:
        status, body = await client.get_text("/readyz")
    except (aiohttp.ClientError, OSError, TimeoutError) as error:
        return f"/readyz unreachable: {described(error)}"
    if status == 200 or status in (401, 403, 404):
        return None
    failed = [line[3:].split(" ")[0] for line in body.splitlines() if line.startswith("[-]")]
    return f"/readyz {status}" + (f": {', '.join(failed)} not ready" if failed else f": {_short(body)}")


async def transient_reason(client: KubeClient, host: str, error: BaseException) -> str | None:
    """Why ``error``, raised by a request to the API server at ``host``, is worth waiting out; None when it is
    not (the caller then fails loudly)."""
    if isinstance(error, ApiError):
        answered = f"{error.status} {error.reason}: {_short(error.message)}".replace(" : ", ": ")
        if error.status >= 500 or error.status in (408, 429):
            return f"the API server at {host} answered {answered}"
        if error.status in (401, 403, 404):
            not_ready = await readyz_problem(client)
            if not_ready is not None:
                return f"the API server at {host} is not ready ({not_ready}) and answered {answered}"
        return None
    if isinstance(error, aiohttp.ClientConnectorCertificateError | ssl.SSLCertVerificationError | aiohttp.InvalidURL):
        return None  # a wrong CA or server name, a malformed URL: configuration, not an outage
    if isinstance(error, aiohttp.ClientError | OSError | TimeoutError):
        return f"cannot reach the API server at {host}: {described(error)}"
    return None


def described(error: BaseException) -> str:
    """An error in one short line: its message (aiohttp's name host, port and cause), else its type."""
    return _short(str(error)) or type(error).__name__


@dataclass
class ApiWait:
    """Probes the API server until it answers (``wait``), and says meanwhile why it is not ready (``problem``)."""

    host: str
    backoff: Backoff = field(default_factory=Backoff)
    clock: Callable[[], float] = time.monotonic
    attempts: int = 0
    failed: int = 0
    _since: float | None = None
    _reason: str = ""

    def problem(self) -> str | None:
        """While waiting: how long, which attempt, and why; None once the API server answered (or before)."""
        if self._since is None:
            return None
        return (f"waiting for the API server for {self.clock() - self._since:.0f} s "
                f"(failed attempts: {self.failed}): {self._reason}")

    async def wait(self, probe: Callable[[], Awaitable[None]], stop: asyncio.Event) -> bool:
        """Run ``probe`` until it returns (True) or ``stop`` is set (False). ``probe`` raises ``Unavailable`` for
        what is worth waiting out; anything else it raises ends the wait and propagates."""
        began = self.clock()
        while not stop.is_set():
            self.attempts += 1
            try:
                async with asyncio.timeout(PROBE_TIMEOUT):
                    await probe()
            except Unavailable as unavailable:
                reason = str(unavailable)
            except TimeoutError:
                reason = f"cannot reach the API server at {self.host}: no answer within {PROBE_TIMEOUT:.0f} s"
            else:
                if self._since is not None:
                    logger.info("API server reachable", extra={"kv": {
                        "host": self.host, "attempts": self.attempts, "waited_s": round(self.clock() - began, 1)}})
                self._since = None
                return True
            if self._since is None:
                self._since = began
            self._reason, self.failed = reason, self.failed + 1
            delay = self.backoff.delay(self.attempts)
            logger.warning("waiting for the API server", extra={"kv": {
                "attempt": self.attempts, "retry_in_s": round(delay, 1), "reason": reason}})
            try:
                async with asyncio.timeout(delay):
                    await stop.wait()
            except TimeoutError:
                pass
        return False
