"""Structured log lines: logfmt and JSON, with key=value pairs after the message."""

from __future__ import annotations

import logging

import orjson

from shared.logs import JSONFormatter, LogfmtFormatter


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


def test_json_line() -> None:
    assert orjson.loads(JSONFormatter().format(record(op="mutate", patch_ops=3))) == {
        "ts": 1_795_990_000.25, "level": "info", "logger": "webhook", "msg": "admission", "op": "mutate",
        "patch_ops": 3}
