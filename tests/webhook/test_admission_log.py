"""The canonical admission line is an ordinary log record, as the process logs it: whatever the standard
library's logging is configured with (record factories, filters, handlers) sees it."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator
from typing import Any

import orjson

from shared.logs import LogfmtFormatter, TurnBufferedHandler
from tests.webhook.conftest import Client, review
from webhook.app import VALIDATE_PATH

UID = "0d5c4e1a-7b2f-4f55-9a53-1f4c7d9f0002"

JOB = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "pi", "namespace": "default"},
       "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": {"spec": {"containers": [
           {"name": "main", "image": "mpi-pi"}]}}}}}}


@contextlib.contextmanager
def configured_as_served() -> Iterator[tuple[list[logging.LogRecord], io.StringIO]]:
    """The root logger as ``python -m webhook`` configures it (one turn-buffered logfmt handler, info; without
    the capturing handler pytest adds for each test's call), and a record factory that keeps every record."""
    stream, made = io.StringIO(), []
    handler = TurnBufferedHandler(stream)
    handler.setFormatter(LogfmtFormatter())
    root, factory = logging.getLogger(), logging.getLogRecordFactory()

    def keep(*args: Any, **kwargs: Any) -> logging.LogRecord:
        made.append(factory(*args, **kwargs))
        return made[-1]

    saved = root.handlers[:], root.level
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)  # setLevel, not an assignment: it clears the loggers' cached levels
    logging.setLogRecordFactory(keep)
    try:
        yield made, stream
    finally:
        logging.setLogRecordFactory(factory)
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


async def test_the_admission_line_is_a_log_record(client: Client) -> None:
    with configured_as_served() as (made, stream):
        answer = await client.post(VALIDATE_PATH, data=orjson.dumps(review(JOB, uid=UID)),
                                   headers={"Content-Type": "application/json"})
        logging.getLogger().handlers[0].flush()
    assert answer.status == 200
    admission = [record for record in made if record.name == "webhook" and record.getMessage() == "admission"]
    assert len(admission) == 1
    assert admission[0].kv["uid"] == UID  # type: ignore[attr-defined]
    [line] = [line for line in stream.getvalue().splitlines() if "msg=admission" in line]
    assert f" level=info logger=webhook msg=admission op=validate uid={UID} " in line
    assert " result=allowed " in line
