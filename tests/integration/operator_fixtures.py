"""Session fixtures running our webhook and reconciler as processes against the test control plane.

The session reconciler runs as its own ServiceAccount (``deploy/rbac`` applied to the cluster, a
TokenRequest token), never as admin, so that every integration test also checks that the ClusterRole
we ship is enough; tests/integration/test_least_privilege.py checks that it is no more than that.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster import api_v2 as v2_switch
from hack.devcluster.operators import (
    OperatorReconciler,
    OperatorWebhook,
    ServiceAccountCredentials,
    apply_rbac,
    reconciler_credentials,
)
from hack.devcluster.processes import free_port

TOKEN_MARGIN = timedelta(hours=1)  # a (re)started reconciler gets a token valid at least this long


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
    """The session's reconciler, which a test may kill and restart with other flags. It runs under the
    token of the ServiceAccount ``deploy/rbac`` binds (``credentials``), renewed before a start when it
    would expire within ``TOKEN_MARGIN``."""

    def __init__(self, cluster: LocalCluster, work_dir: Path) -> None:
        self.cluster, self.work_dir = cluster, work_dir
        apply_rbac(cluster)
        self.credentials = reconciler_credentials(cluster, work_dir / "reconciler.kubeconfig")
        self.runs = 0
        self.process = self._start()

    def refreshed_credentials(self) -> ServiceAccountCredentials:
        """The reconciler's credentials, with a new token if the current one is close to expiry."""
        if not self.credentials.fresh_for(TOKEN_MARGIN):
            self.credentials = reconciler_credentials(self.cluster, self.credentials.kubeconfig)
        return self.credentials

    def _start(self, *extra: str) -> OperatorReconciler:
        self.runs += 1
        process = OperatorReconciler(self.cluster, self.work_dir, *extra, name=f"reconciler-{self.runs}",
                                     kubeconfig=self.refreshed_credentials().kubeconfig)
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


@pytest.fixture
def alone(reconciler: ReconcilerControl) -> Iterator[ReconcilerControl]:
    """The session reconciler stopped for the test (two reconcilers would share the work), restarted after."""
    reconciler.process.stop()
    try:
        yield reconciler
    finally:
        reconciler.restart()


@pytest.fixture(scope="module")
def api_v2(webhook: OperatorWebhook) -> Iterator[OperatorWebhook]:
    """kubeflow.org/v2 turned on for the tests of a module as an admin turns it on (deploy/crds-v2/), the conversion
    webhook pointed at the session's webhook, and off again after them as the operator guide says (the session's
    CRD is deploy/crds/'s, v2beta1 alone)."""
    webhook.enable_v2()
    try:
        yield webhook
    finally:
        v2_switch.disable(webhook.cluster)


@pytest.fixture
def conversion_unreachable(api_v2: OperatorWebhook) -> Iterator[None]:
    """With v2 on, the CRD's conversion webhook pointed at a port nobody listens on, as when its pods are down."""
    webhook = api_v2
    dead = {**webhook.conversion_client_config(), "url": f"https://127.0.0.1:{free_port()}/convert"}
    webhook.cluster.kubectl("patch", "crd", "mpijobs.kubeflow.org", "--type=json", "-p", json.dumps([
        {"op": "replace", "path": "/spec/conversion/webhook/clientConfig", "value": dead}]), check=True)
    try:
        yield
    finally:  # pointed back at the live webhook, and waited for: the API server picks the change up a moment later
        webhook.register_conversion()
        webhook.wait_converting()
