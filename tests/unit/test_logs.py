"""Structured log lines: logfmt and JSON, with key=value pairs after the message."""

from __future__ import annotations

import asyncio
import io
import logging
import sys

import orjson

from shared.logs import JSONFormatter, LogfmtFormatter, TurnBufferedHandler


def record(**kv: object) -> logging.LogRecord:
    rec = logging.LogRecord("webhook", logging.INFO, __file__, 1, "admission", None, None)
    rec.created, rec.msecs = 1_795_990_000.25, 250.0
    rec.kv = kv
    return rec


def test_logfmt_line() -> None:
    line = LogfmtFormatter().format(record(op="validate", uid="0d5c-1", dry_run=False, errors=2, note="two words",
                                           empty="", names=["a", "b"]))
    assert line == ('ts=2026-11-29T22:06:40.250Z level=info logger=webhook msg=admission op=validate uid=0d5c-1 '
                    'dry_run=false errors=2 note="two words" empty="" names="[\\"a\\",\\"b\\"]"')


def test_logfmt_pairs_named_like_the_head_replace_its_values_where_they_stand() -> None:
    line = LogfmtFormatter().format(record(msg="other", a=1, level="x y"))
    assert line == 'ts=2026-11-29T22:06:40.250Z level="x y" logger=webhook msg=other a=1'


def test_logfmt_error_replaces_an_error_pair_where_it_stands() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        exc_info = sys.exc_info()
    formatter = LogfmtFormatter()
    trace = orjson.dumps(formatter.formatException(exc_info)).decode()
    assert trace.startswith('"Traceback (most recent call last):\\n')
    assert trace.endswith('ValueError: boom"')
    with_error = record(error="old", b=2)
    with_error.exc_info = exc_info
    assert formatter.format(with_error) == (
        f"ts=2026-11-29T22:06:40.250Z level=info logger=webhook msg=admission error={trace} b=2")
    without = record(b=2)
    without.exc_info = exc_info
    assert formatter.format(without) == (
        f"ts=2026-11-29T22:06:40.250Z level=info logger=webhook msg=admission b=2 error={trace}")


def test_logfmt_timestamps_are_utc_with_milliseconds() -> None:
    rec = record()
    rec.created, rec.msecs = 1_795_990_059.9996, 999.0  # LogRecord truncates msecs: it never rounds up a second
    assert LogfmtFormatter().format(rec) == "ts=2026-11-29T22:07:39.999Z level=info logger=webhook msg=admission"


def test_json_line() -> None:
    assert orjson.loads(JSONFormatter().format(record(op="mutate", patch_ops=3))) == {
        "ts": 1_795_990_000.25, "level": "info", "logger": "webhook", "msg": "admission", "op": "mutate",
        "patch_ops": 3}


class CountingStream(io.StringIO):
    writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def test_turn_buffered_handler_writes_one_turn_at_once_in_order() -> None:
    stream = CountingStream()
    handler = TurnBufferedHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger("test-turn-buffered")
    log.handlers[:], log.propagate, log.level = [handler], False, logging.INFO

    async def turns() -> None:
        log.info("one")
        log.info("two")
        assert stream.getvalue() == "before\n"  # nothing written inside the turn
        await asyncio.sleep(0)
        log.info("three")

    log.info("before")
    asyncio.run(turns())
    log.info("after")
    assert stream.getvalue() == "before\none\ntwo\nthree\nafter\n"
    assert stream.writes == 4  # before, one+two, three, after


def test_turn_buffered_handler_flush_writes_what_is_pending() -> None:
    stream = io.StringIO()
    handler = TurnBufferedHandler(stream)

    async def log_then_stop() -> None:
        handler.emit(logging.LogRecord("x", logging.INFO, __file__, 1, "pending", None, None))

    loop = asyncio.new_event_loop()
    loop.run_until_complete(log_then_stop())
    loop.close()  # the write scheduled for the end of the turn never ran
    handler.flush()
    assert stream.getvalue() == "pending\n"
