"""What the reconciler logs while the API server is unreachable (seen in the restart tests).

During a kube-apiserver restart every sync fails with a connection error, and ``Controller.process``
logged each one with ``logger.exception``: a 40-line aiohttp traceback per failed sync, at error level,
where one line naming the key and the error does (the sync is requeued anyway). Regression test.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from reconciler.mpijob.caches import Caches
from reconciler.mpijob.controller import Controller
from reconciler.mpijob.metrics import OperatorMetrics
from reconciler.runtime.workqueue import WorkQueue
from reconciler.settings import Settings


class _Unreachable:
    """A Reconciler whose every sync fails as it does while the API server restarts."""

    def __init__(self) -> None:
        self.shared = SimpleNamespace(settler=SimpleNamespace(requeue=None), caches=Caches(), settings=Settings())
        self.registry = CollectorRegistry()
        self.metrics = OperatorMetrics(self.registry)

    async def sync(self, key: str) -> str:
        raise aiohttp.ClientConnectionError("Cannot connect to host 127.0.0.1:6443 [Connect call failed]")


async def test_a_sync_failing_for_an_unreachable_api_server_logs_one_line(caplog: pytest.LogCaptureFixture) -> None:
    reconciler: Any = _Unreachable()
    controller = Controller(SimpleNamespace(), reconciler, WorkQueue())  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="reconciler"):
        await controller.process("ns/job")
    failures = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert failures, "the failed sync is logged"
    assert all(r.exc_info is None for r in failures), "one line, no traceback"
    assert "Cannot connect" in " ".join(r.getMessage() + str(getattr(r, "kv", "")) for r in failures)
    errors = reconciler.registry.get_sample_value("mpi_operator_reconcile_errors_total", {"kind": "unreachable"})
    assert errors == 1.0, "the failed sync is counted as unreachable"
