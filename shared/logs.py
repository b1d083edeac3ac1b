"""Structured logging: one ``key=value`` line per event (logfmt), or JSON lines.

Use ``log.info("admission", extra={"kv": {...}})``: the ``kv`` pairs are rendered after the message.
Never pass Secret data or whole request bodies.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import Any

import orjson

_PLAIN = re.compile(r"[A-Za-z0-9_./:@-]+").fullmatch


def _logfmt_value(value: Any) -> str:
    """A bare word when it is one, JSON otherwise (a quoted string, a list, an object)."""
    kind = type(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int or kind is float:
        return repr(value)
    text = value if kind is str else orjson.dumps(value, default=str).decode()
    if text and _PLAIN(text):
        return text
    return orjson.dumps(text).decode()


class LogfmtFormatter(logging.Formatter):
    """``ts=... level=info logger=webhook msg=admission key=value ...``."""

    _second = -1
    _second_text = ""

    def _timestamp(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._second:  # strftime once per second, not once per line
            self._second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return f"{self._second_text}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        pairs: dict[str, Any] = {
            "ts": self._timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        pairs.update(getattr(record, "kv", {}))
        if record.exc_info:
            pairs["error"] = self.formatException(record.exc_info)
        return " ".join(f"{key}={_logfmt_value(value)}" for key, value in pairs.items())


class JSONFormatter(LogfmtFormatter):
    """One JSON object per line, with the same keys as the logfmt form."""

    def format(self, record: logging.LogRecord) -> str:
        pairs: dict[str, Any] = {
            "ts": record.created,
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **getattr(record, "kv", {}),
        }
        if record.exc_info:
            pairs["error"] = self.formatException(record.exc_info)
        return orjson.dumps(pairs, default=str).decode()


def configure_logging(level: str = "info", fmt: str = "logfmt") -> None:
    """Send structured lines to stderr at ``level`` (debug, info, warning, error)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if fmt == "json" else LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The formatters use no thread, process or caller fields: skip collecting them for every record
    # (the logging HOWTO's "Optimization" switches; the caller lookup walks the stack on each call).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
