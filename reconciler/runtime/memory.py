"""Free memory given back to the operating system, as the Go runtime's scavenger does for Go operators.

CPython keeps small objects in its own arenas, which it unmaps when they empty, but hands everything larger
than 512 bytes (response bodies, watch events, decoded pods while a sync runs, TLS buffers) to malloc. glibc
keeps what those free inside its heap for reuse, so a burst of creates leaves the process megabytes larger
than what it holds afterwards; ``malloc_trim(0)`` returns every free page of the heap (not only its top).
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
from collections.abc import Callable

RELEASE_INTERVAL_SECONDS = 10.0


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim  # glibc; other C libraries have no such call
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = (ctypes.c_size_t,), ctypes.c_int
    function: Callable[[int], int] = trim
    return function


def release_free_memory() -> bool:
    """Return the C heap's free pages to the operating system; True if anything was released."""
    trim = _malloc_trim()
    return trim is not None and bool(trim(0))


async def release_periodically(interval: float = RELEASE_INTERVAL_SECONDS) -> None:
    """``release_free_memory`` every ``interval`` seconds (a few milliseconds each), until cancelled."""
    while True:
        await asyncio.sleep(interval)
        release_free_memory()
