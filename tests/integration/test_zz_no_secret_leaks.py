"""Run last in the integration session (file order): no Secret data, private key or token in any log line
of our webhook and reconciler processes, nor in any event of any test namespace (kept by the
``namespace`` fixture before the namespace went), after every other integration test ran."""

from __future__ import annotations

from pathlib import Path

import orjson
import yaml

from hack.devcluster import LocalCluster
from hack.devcluster.operators import OperatorWebhook
from tests.integration.conftest import events_file
from tests.integration.operator_fixtures import ReconcilerControl
from tests.secret_scan import assert_clean, scan_events, scan_files


def test_no_secret_in_any_log_or_event(cluster: LocalCluster, operator_dir: Path, webhook: OperatorWebhook,
                                       reconciler: ReconcilerControl) -> None:
    kubeconfig = yaml.safe_load(reconciler.credentials.kubeconfig.read_text())
    known = [user["user"]["token"] for user in kubeconfig["users"] if user["user"].get("token")]
    assert known, "the reconciler runs under a token, which must never be logged"
    logs = sorted(operator_dir.rglob("*.log"))
    assert any("reconciler" in path.name for path in logs)
    assert any("webhook" in path.name for path in logs)
    events = [orjson.loads(line) for line in events_file(cluster).read_bytes().splitlines()] if (
        events_file(cluster).exists()) else []
    assert events, "the integration tests record events; none were kept"
    assert_clean(scan_files(logs, known=known) + scan_events(events, known=known))
