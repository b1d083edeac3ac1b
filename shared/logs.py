"""Structured logging: one ``key=value`` line per event (logfmt), or JSON lines.

Use ``log.info("admission", extra={"kv": {...}})``: the ``kv`` pairs are rendered after the message.
Never pass Secret data or whole request bodies.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import time
from typing import Any, TextIO

import orjson

_PLAIN = re.compile(r"[A-Za-z0-9_./:@-]+").fullmatch


def _logfmt_value(value: Any) -> str:
    """A bare word when it is one, JSON otherwise (a quoted string, a list, an object)."""
    kind = type(value)
    if kind is str:
        if value.isascii() and value.isalnum():  # the common case, without the regex
            return value  # type: ignore[no-any-return]
        text: str = value
    elif kind is bool:
        return "true" if value else "false"
    elif kind is int or kind is float:
        return repr(value)
    else:
        text = orjson.dumps(value, default=str).decode()
    if text and _PLAIN(text):
        return text
    return orjson.dumps(text).decode()


class LogfmtFormatter(logging.Formatter):
    """``ts=2026-11-29T22:06:40.250Z level=info logger=webhook msg=admission key=value ...``: a record's
    ``kv`` pairs follow the message; a traceback is the pair ``error``."""

    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"

    @staticmethod
    def converter(seconds: float | None = None, /) -> time.struct_time:
        """Timestamps in UTC."""
        return time.gmtime(seconds)

    def format(self, record: logging.LogRecord) -> str:
        pairs = self.pairs(record, self.formatTime(record))
        return " ".join([f"{key}={_logfmt_value(value)}" for key, value in pairs.items()])

    def pairs(self, record: logging.LogRecord, ts: str | float) -> dict[str, Any]:
        """The line's keys and values, in order."""
        pairs: dict[str, Any] = {"ts": ts, "level": record.levelname.lower(), "logger": record.name,
                                 "msg": record.getMessage()}
        pairs.update(getattr(record, "kv", {}))  # a pair named like a head key replaces its value where it stands
        if record.exc_info:
            pairs["error"] = self.formatException(record.exc_info)
        return pairs


class JSONFormatter(LogfmtFormatter):
    """One JSON object per line, with the same keys as the logfmt form (``ts`` in seconds since the epoch)."""

    def format(self, record: logging.LogRecord) -> str:
        return orjson.dumps(self.pairs(record, record.created), default=str).decode()


class TurnBufferedHandler(logging.StreamHandler[TextIO]):
    """A stream handler that writes the lines logged during one event-loop turn with one write.

    A server answering many requests per turn otherwise pays one system call per log line: with 16 lines a
    turn written to a pipe, about 14 instead of 23 µs a line (one line a turn: the same). Lines logged
    outside a running loop are written at once, after any pending ones, so order is kept; ``flush`` (called
    by ``logging.shutdown`` at exit) writes what is pending.
    """

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._pending: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._write_pending()
            super().emit(record)
            return
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        if not self._pending:
            loop.call_soon(self._write_pending)
        self._pending.append(line)

    def flush(self) -> None:
        self._write_pending()
        super().flush()

    def _write_pending(self) -> None:
        if not self._pending:
            return
        self.acquire()  # a line logged from another thread must not interleave (emit runs under it too)
        try:
            lines, self._pending = self._pending, []
            if not lines:  # written by another thread meanwhile
                return
            self.stream.write("\n".join(lines) + "\n")
            self.stream.flush()
        except Exception:  # as logging.Handler.handleError would, without a record to name
            if logging.raiseExceptions:
                sys.stderr.write("--- Logging error: could not write buffered log lines ---\n")
        finally:
            self.release()


def configure_logging(level: str = "info", fmt: str = "logfmt", *, per_loop_turn: bool = False) -> None:
    """Send structured lines to stderr at ``level`` (debug, info, warning, error).

    ``per_loop_turn``: write the lines of one event-loop turn together (``TurnBufferedHandler``).
    """
    handler = TurnBufferedHandler(sys.stderr) if per_loop_turn else logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if fmt == "json" else LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
