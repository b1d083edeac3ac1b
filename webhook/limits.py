"""What a request may cost the webhook: bodies read against a per-route size limit, and a ConversionReview's
parse cost estimated before it is parsed.

The validating webhook fails closed, so the webhook must never be the pod that runs out of memory. Its memory
is bounded by what it accepts: ``read_limited`` counts a body while reading it, chunked or not, and stops at
the limit without buffering the rest; ``parse_cost`` bounds from above the memory that parsing a JSON body,
converting it and encoding the answer can take, whatever the body's shape, from a count of its bytes, its
containers and its strings (a few milliseconds for 32 MiB). The figures behind the weights are measured on
CPython 3.11 with orjson (docs/operator-guide.md, "Webhook memory").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aiohttp import web

# Bytes of memory per byte of body: the body itself, the decoded numbers and strings (a 5-byte `1000,` is a
# 32-byte int and an 8-byte pointer), and the encoded answer.
COST_PER_BYTE: Final = 8
# An object or array: an 80-byte dict or list with its collector header, and the pointer to it (`{},` is 3 bytes).
COST_PER_CONTAINER: Final = 90
# A string: its 49-byte header and a pointer (`"ab",` is 5 bytes; one-character strings are shared).
COST_PER_STRING: Final = 60


@dataclass(frozen=True)
class ConversionLimits:
    """What ``/convert`` takes on. ``cost_bytes``: the most one ConversionReview may cost (``parse_cost``); with
    the shipped 512 MiB memory limit, 60 MiB idle, 320 MiB for one conversion at its estimated worst and the rest
    for admission meanwhile. That admits 20 MiB of realistic 11 KB MPIJobs, 21 MiB of the smallest MPIJobs, or
    8.4 MiB of an array of empty objects. ``concurrent``: conversions, and admission reviews of 256 KiB or more,
    read and answered at once; they hold the GIL, so two at once take as long as one after the other, with twice
    the memory."""

    cost_bytes: int = 320 * 1024 * 1024
    concurrent: int = 1


async def read_limited(request: web.Request, limit: int) -> bytes:
    """The request's body; HTTPRequestEntityTooLarge when it is longer than ``limit`` bytes, from the
    Content-Length before anything is read when the client sends one, else as soon as the bytes read pass the
    limit (a chunked body), without reading the rest: what is held never exceeds ``limit`` and one chunk."""
    if request.content_length is not None and request.content_length > limit:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=request.content_length)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=size)
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def parse_cost(body: bytes) -> int:
    """An upper bound, in bytes, of the memory that decoding ``body`` as JSON, converting every object in it and
    encoding the answer take at their peak (braces and quotes inside strings only raise it)."""
    containers = body.count(b"{") + body.count(b"[")
    strings = body.count(b'"') // 2
    return COST_PER_BYTE * len(body) + COST_PER_CONTAINER * containers + COST_PER_STRING * strings
