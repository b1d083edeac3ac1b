"""The event loop's error handler: uvloop's write to a closed TLS connection is one warning line without a
traceback; any other error still reaches asyncio's default handler."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from reconciler.runtime import loop_errors


class SSLProtocol:
    """Named as uvloop's TLS protocol class (uvloop.loop.SSLProtocol); only the name is looked at."""


CLOSED = RuntimeError("unable to perform operation on <TCPTransport closed=True reading=False 0x55ab>; "
                      "the handler is closed")


class Recording(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        super().__init__()
        self.defaults: list[dict[str, Any]] = []

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        self.defaults.append(context)


@pytest.fixture
def loop() -> Any:
    recording = Recording()
    loop_errors.install(recording)
    yield recording
    recording.close()


def test_a_write_to_a_closed_tls_connection_is_one_warning_line(loop: Recording,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    context = {"message": "Fatal error on SSL protocol", "exception": CLOSED, "protocol": SSLProtocol()}
    with caplog.at_level(logging.DEBUG, logger="reconciler.runtime.loop"):
        loop.call_exception_handler(context)
    assert loop.defaults == []
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in caplog.records] == [
        ("WARNING", "TLS connection closed by the peer while data was still to be written; dropped", None)]
    assert caplog.records[0].kv == {"error": str(CLOSED)}  # type: ignore[attr-defined]


@pytest.mark.parametrize("context", [
    {"message": "Fatal error on SSL protocol", "exception": RuntimeError("something else"), "protocol": SSLProtocol()},
    {"message": "Fatal error on transport", "exception": CLOSED, "protocol": object()},
    {"message": "Task exception was never retrieved", "exception": ValueError("boom")},
    {"message": "no exception at all"},
], ids=["other-runtime-error", "not-tls", "task", "message-only"])
def test_every_other_error_goes_to_the_default_handler(loop: Recording, context: dict[str, Any],
                                                       caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="reconciler.runtime.loop"):
        loop.call_exception_handler(context)
    assert loop.defaults == [context]
    assert caplog.records == []
