"""Integration tests run against one real local control plane per test session (hack/devcluster).

Every test under tests/integration is marked `integration`. The control plane is never skipped: if
its binaries are missing and cannot be built, the `cluster` fixture fails with the reason.
Set MPIJOB_CLUSTER_LOGS=<dir> to keep the component logs after the run.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import orjson
import pytest

from hack.devcluster import HarnessError, LocalCluster
from hack.devcluster.audit import audit_flags
from hack.devcluster.binaries import find_bin_dir
from hack.devcluster.helm import find_helm
from tests.integration.operator_fixtures import (  # noqa: F401  (fixtures)
    alone,
    api_v2,
    conversion_unreachable,
    operator_dir,
    reconciler,
    webhook,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
MPIJOB_CRD = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.integration)


def _start(config: pytest.Config) -> LocalCluster | str:
    """A started cluster, or why it could not start. The binaries are found (built on first use, ~20 min)
    with pytest's capture off, so that the build's progress shows."""
    capture = config.pluginmanager.getplugin("capturemanager")
    logs = os.environ.get("MPIJOB_CLUSTER_LOGS")
    try:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            bin_dir = find_bin_dir()
        audit_dir = Path(tempfile.mkdtemp(prefix="mpijob-audit-"))
        flags, _ = audit_flags(audit_dir)
        local = LocalCluster(nodes=3, gpus_per_node=8, gpu_nodes=1, bin_dir=bin_dir, apiserver_flags=flags,
                             crds=[MPIJOB_CRD] if MPIJOB_CRD.exists() else [], keep_logs=Path(logs) if logs else None)
        local.audit_log = audit_dir / "audit.log"
        return local.start()  # stops and cleans up by itself when it fails
    except HarnessError as err:
        return str(err)


@pytest.fixture(scope="session")
def helm_binary() -> Path:
    """Helm built from the Go module proxy (make helm), or the test skipped without it."""
    try:
        return find_helm()
    except HarnessError as exc:
        pytest.skip(f"helm is not available: {exc}")


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config) -> Iterator[LocalCluster]:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok, with the MPIJob CRD
    installed (when generated) and 3 fake nodes, the first of which has 8 nvidia.com/gpu. The API server
    writes an audit log (Metadata level) at ``cluster.audit_log``."""
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_DFL:  # a CI timeout's SIGTERM then tears the cluster down like Ctrl-C
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        local = _start(pytestconfig)
        if isinstance(local, str):
            pytest.fail(f"the local control plane did not start: {local}", pytrace=False)
        try:
            yield local
        finally:
            local.stop()
            if local.audit_log is not None:
                if local.keep_logs is not None:
                    with contextlib.suppress(OSError):
                        shutil.copy2(local.audit_log, local.keep_logs / "audit.log")
                shutil.rmtree(local.audit_log.parent, ignore_errors=True)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def namespace_name(test_name: str) -> str:
    """A valid, unique namespace name (DNS label) derived from a test's name."""
    base = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:50].strip("-") or "test"
    return f"{base}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def namespace(cluster: LocalCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test; deleted afterwards without waiting for it to go."""
    name = namespace_name(request.node.name)
    cluster.rest.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        keep_events(cluster, name)
        cluster.rest.request("DELETE", f"/api/v1/namespaces/{name}", {"propagationPolicy": "Background"})


def events_file(cluster: LocalCluster) -> Path:
    """Where the events of every test namespace are kept, for the end-of-session secret scan."""
    return cluster.work_dir / "events.jsonl"


def keep_events(cluster: LocalCluster, namespace: str) -> None:
    """Append the namespace's events to ``events_file`` before the namespace (and they) go."""
    with contextlib.suppress(Exception), events_file(cluster).open("ab") as out:
        for event in cluster.rest.get(f"/api/v1/namespaces/{namespace}/events")["items"]:
            out.write(orjson.dumps(event) + b"\n")
