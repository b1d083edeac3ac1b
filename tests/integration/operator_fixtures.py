"""Session fixtures running our webhook and reconciler as processes against the test control plane."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import LocalCluster
from tests.operator_processes import OperatorReconciler, OperatorWebhook


@pytest.fixture(scope="session")
def operator_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("operator")


@pytest.fixture(scope="session")
def webhook(cluster: LocalCluster, operator_dir: Path) -> Iterator[OperatorWebhook]:
    """Our webhook, registered as we ship it, and known to be called by the API server."""
    process = OperatorWebhook(cluster, operator_dir)
    process.start()
    try:
        process.wait_ready()
        process.register()
        yield process
    finally:
        process.unregister()
        process.stop()


class ReconcilerControl:
    """The session's reconciler, which a test may kill and restart with other flags."""

    def __init__(self, cluster: LocalCluster, work_dir: Path) -> None:
        self.cluster, self.work_dir = cluster, work_dir
        self.runs = 0
        self.process = self._start()

    def _start(self, *extra: str) -> OperatorReconciler:
        self.runs += 1
        process = OperatorReconciler(self.cluster, self.work_dir, *extra, name=f"reconciler-{self.runs}")
        process.start()
        process.wait_ready()
        return process

    def restart(self, *extra: str, crash: bool = False) -> OperatorReconciler:
        self.process.kill() if crash else self.process.stop()
        self.process = self._start(*extra)
        return self.process

    def stop(self) -> None:
        self.process.stop()


@pytest.fixture(scope="session")
def reconciler(cluster: LocalCluster, webhook: OperatorWebhook, operator_dir: Path) -> Iterator[ReconcilerControl]:
    control = ReconcilerControl(cluster, operator_dir)
    try:
        yield control
    finally:
        control.stop()
