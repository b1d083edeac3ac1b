"""Structured log lines: logfmt and JSON, with key=value pairs after the message."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from shared.logs import JSONFormatter, LogfmtFormatter, TurnBufferedHandler, log_info


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
    formatter = LogfmtFormatter()
    assert formatter.line(1_795_990_000.25, 250.0, "ERROR", "webhook", "failed", {"error": "old", "b": 2}, "boom") == (
        "ts=2026-11-29T22:06:40.250Z level=error logger=webhook msg=failed error=boom b=2")
    assert formatter.line(1_795_990_000.25, 250.0, "ERROR", "webhook", "failed", {"b": 2}, "two words") == (
        'ts=2026-11-29T22:06:40.250Z level=error logger=webhook msg=failed b=2 error="two words"')


def test_logfmt_heads_are_kept_for_a_few_messages_only() -> None:
    formatter = LogfmtFormatter()
    lines = [formatter.line(1_795_990_000.25, 250.0, "INFO", "reconciler.sync", f"message {i}", {"i": i})
             for i in range(LogfmtFormatter._HEADS_KEPT + 10)]
    assert lines[-1] == (f'ts=2026-11-29T22:06:40.250Z level=info logger=reconciler.sync '
                         f'msg="message {LogfmtFormatter._HEADS_KEPT + 9}" i={LogfmtFormatter._HEADS_KEPT + 9}')
    assert len(formatter._heads) == LogfmtFormatter._HEADS_KEPT
    assert formatter.line(1_795_990_000.25, 250.0, "INFO", "reconciler.sync", "message 3", {"i": 3}) == lines[3]


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


@pytest.fixture(autouse=False)
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: 1_795_990_000.25)  # LogRecord's clock and log_info's
    monkeypatch.setattr(time, "time_ns", lambda: 1_795_990_000_250_000_000)


@contextlib.contextmanager
def turn_buffered_root() -> Iterator[tuple[TurnBufferedHandler, io.StringIO]]:
    """The root logger as ``configure_logging(per_loop_turn=True)`` leaves it (without pytest's capturing
    handler, which it adds for each test's call), restored afterwards."""
    stream = io.StringIO()
    handler = TurnBufferedHandler(stream)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    root.handlers[:], root.level = [handler], logging.INFO
    try:
        yield handler, stream
    finally:
        root.handlers[:], root.level = saved


KV = {"op": "validate", "uid": "0d5c-1", "dry_run": False, "errors": 2, "note": "two words", "msg": "kv wins"}


@pytest.mark.usefixtures("fixed_clock")
def test_log_info_writes_the_line_a_record_would(monkeypatch: pytest.MonkeyPatch) -> None:
    log = logging.getLogger("webhook.test-direct")
    records: list[logging.LogRecord] = []

    def make_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        records.append(logging.Logger.makeRecord(log, *args, **kwargs))
        return records[-1]

    monkeypatch.setattr(log, "makeRecord", make_record)

    async def both() -> None:
        log_info(log, "admission", dict(KV))
        log.info("admission", extra={"kv": dict(KV)})

    with turn_buffered_root() as (_, stream):
        asyncio.run(both())
    direct, via_record = stream.getvalue().splitlines()
    assert direct == via_record == ('ts=2026-11-29T22:06:40.250Z level=info logger=webhook.test-direct msg="kv wins" '
                                    'op=validate uid=0d5c-1 dry_run=false errors=2 note="two words"')
    assert len(records) == 1  # log_info made none


@pytest.mark.usefixtures("fixed_clock")
def test_log_info_json() -> None:
    async def one() -> None:
        log_info(logging.getLogger("test-json"), "admission", {"op": "mutate", "patch_ops": 3})

    with turn_buffered_root() as (handler, stream):
        handler.setFormatter(JSONFormatter())
        asyncio.run(one())
    assert orjson.loads(stream.getvalue()) == {"ts": 1_795_990_000.25, "level": "info", "logger": "test-json",
                                               "msg": "admission", "op": "mutate", "patch_ops": 3}


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_log_info_takes_the_record_path_when_anything_else_listens() -> None:
    log = logging.getLogger("webhook.test-listened")
    extra = Collect()
    log.addHandler(extra)
    with turn_buffered_root() as (handler, stream):
        async def one() -> None:
            log_info(log, "admission", {"op": "mutate"})

        asyncio.run(one())
        assert [r.kv for r in extra.records] == [{"op": "mutate"}]  # type: ignore[attr-defined]
        assert "op=mutate" in stream.getvalue()  # and propagated to the root's handler as a record
        handler.addFilter(lambda record: True)
        log.removeHandler(extra)

        asyncio.run(one())
        assert stream.getvalue().count("op=mutate") == 2  # a filter on the handler: the record path again
    log.removeHandler(extra)


def test_log_info_outside_a_loop_and_below_the_level() -> None:
    log = logging.getLogger("webhook.test-no-loop")
    with turn_buffered_root() as (_, stream):
        log_info(log, "admission", {"op": "mutate"})  # no running loop: written at once, through a record
        assert stream.getvalue().endswith("msg=admission op=mutate\n")
        log.setLevel(logging.WARNING)
        try:
            log_info(log, "admission", {"op": "ignored"})
        finally:
            log.setLevel(logging.NOTSET)
    assert "ignored" not in stream.getvalue()
