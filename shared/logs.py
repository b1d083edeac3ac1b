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


# Keys of the line's head: a pair with one of these names replaces the head's value where it stands.
_HEAD_KEYS = frozenset({"ts", "level", "logger", "msg"})


class LogfmtFormatter(logging.Formatter):
    """``ts=... level=info logger=webhook msg=admission key=value ...``."""

    _second = -1
    _second_text = ""
    _HEADS_KEPT = 256

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._heads: dict[tuple[str, str, str], str] = {}  # "level=... logger=... msg=..." by its fields

    def format(self, record: logging.LogRecord) -> str:
        error = self.formatException(record.exc_info) if record.exc_info else None
        return self.line(record.created, record.msecs, record.levelname, record.name, record.getMessage(),
                         getattr(record, "kv", {}), error)

    def line(self, created: float, msecs: float, level: str, name: str, msg: str, kv: dict[str, Any],
             error: str | None = None) -> str:
        """The line of a record with these fields (``created``/``msecs`` as ``LogRecord`` sets them)."""
        second = int(created)
        if second != self._second:  # strftime once per second, not once per line
            self._second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        ts = f"{self._second_text}.{int(msecs):03d}Z"
        if _HEAD_KEYS.isdisjoint(kv) and (error is None or "error" not in kv):  # every line but odd ones
            head = self._heads.get((level, name, msg))
            if head is None:
                head = f"level={_logfmt_value(level.lower())} logger={_logfmt_value(name)} msg={_logfmt_value(msg)}"
                if len(self._heads) < self._HEADS_KEPT:  # messages are few; one built at run time is not kept
                    self._heads[level, name, msg] = head
            parts = [f"ts={ts}", head, *[f"{key}={_logfmt_value(value)}" for key, value in kv.items()]]
            if error is not None:
                parts.append(f"error={_logfmt_value(error)}")
            return " ".join(parts)
        pairs = {"ts": ts, "level": level.lower(), "logger": name, "msg": msg, **kv}
        if error is not None:
            pairs["error"] = error
        return " ".join([f"{key}={_logfmt_value(value)}" for key, value in pairs.items()])


class JSONFormatter(LogfmtFormatter):
    """One JSON object per line, with the same keys as the logfmt form."""

    def line(self, created: float, msecs: float, level: str, name: str, msg: str, kv: dict[str, Any],
             error: str | None = None) -> str:
        pairs = {"ts": created, "level": level.lower(), "logger": name, "msg": msg, **kv}
        if error is not None:
            pairs["error"] = error
        return orjson.dumps(pairs, default=str).decode()


class TurnBufferedHandler(logging.StreamHandler[TextIO]):
    """A stream handler that writes the lines logged during one event-loop turn with one write.

    A server answering many requests per turn otherwise pays one system call per log line. Lines logged
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
        self.add_line(line, loop)

    def add_line(self, line: str, loop: asyncio.AbstractEventLoop) -> None:
        """``emit`` for a line already formatted, from a coroutine of ``loop``."""
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
    # The formatters use no thread, process or caller fields: skip collecting them for every record
    # (the logging HOWTO's "Optimization" switches; the caller lookup walks the stack on each call).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def log_info(logger: logging.Logger, msg: str, kv: dict[str, Any]) -> None:
    """``logger.info(msg, extra={"kv": kv})``, for a line logged on every request.

    When the line would reach only the handler ``configure_logging(per_loop_turn=True)`` installed (no
    handler or filter on the way, the level enabled, inside a running event loop), it is formatted and
    queued directly, without a ``LogRecord`` and the handler chain: the same line, for about a third less CPU.
    Anything else (tests capturing logs, other handlers) takes the ordinary path.
    """
    handler = _direct_handler(logger)
    if handler is None:
        logger.info(msg, extra={"kv": kv})
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        logger.info(msg, extra={"kv": kv})
        return
    created = time.time()
    formatter = handler.formatter
    assert isinstance(formatter, LogfmtFormatter)
    handler.add_line(formatter.line(created, int((created - int(created)) * 1000) + 0.0, "INFO", logger.name, msg,
                                    kv), loop)


def _direct_handler(logger: logging.Logger) -> TurnBufferedHandler | None:
    if not logger.isEnabledFor(logging.INFO):
        return None
    node: logging.Logger | None = logger
    while node is not None and node.parent is not None:  # up to the root, which holds the handler
        if node.handlers or node.filters or not node.propagate:
            return None
        node = node.parent
    root = node
    if root is None or root.filters or len(root.handlers) != 1:
        return None
    handler = root.handlers[0]
    if (type(handler) is not TurnBufferedHandler or handler.filters or handler.level > logging.INFO
            or not isinstance(handler.formatter, LogfmtFormatter)):
        return None
    return handler
