"""The event loop's handler for errors no task awaits: one known-harmless uvloop TLS error becomes one warning line,
every other error goes to asyncio's default handler (logged with its traceback, as before).

uvloop (MagicStack/uvloop#506, #685, open) reports ``RuntimeError: unable to perform operation on <TCPTransport
closed=True ...>; the handler is closed`` as "Fatal error on SSL protocol" when TLS data is still to be written on a
connection the peer already closed, typically when the API server drops idle connections under load. The
connection is gone either way: the request on it fails and is retried, and the client opens a new one. asyncio's
own loop closes such a connection silently.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

logger = logging.getLogger("reconciler.runtime.loop")

CLOSED_TRANSPORT = "the handler is closed"


def is_closed_tls_transport(context: dict[str, Any]) -> bool:
    """Whether ``context`` (asyncio's exception-handler context) is uvloop's write to a closed TLS connection."""
    error = context.get("exception")
    protocol = context.get("protocol")
    return (isinstance(error, RuntimeError) and CLOSED_TRANSPORT in str(error)
            and type(protocol).__name__ == "SSLProtocol")


def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    if is_closed_tls_transport(context):
        logger.warning("TLS connection closed by the peer while data was still to be written; dropped",
                       extra={"kv": {"error": str(context["exception"])}})
        return
    loop.default_exception_handler(context)


def install(loop: asyncio.AbstractEventLoop) -> None:
    loop.set_exception_handler(handle)
