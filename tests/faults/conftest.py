"""The fault suite (docs/reliability.md): the reconciler SIGKILLed, the API server and etcd restarted,
a 5,000-worker job, on a control plane of its own with an audit log.

Tests marked ``faults`` are the full version, run by ``make faults`` (``pytest -m faults``); the
others are the short version that ``make test`` runs. Every test here needs the control plane, so
it is also marked ``integration``. ``FAULT_SEED=<n>`` repeats a run's random choices; the figures
each test records are printed at the end of the run (and appended to ``$FAULT_FIGURES`` if set).
Set MPIJOB_CLUSTER_LOGS=<dir> to keep the component logs.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hack.devcluster import HarnessError, LocalCluster, NodePool
from hack.devcluster.audit import audit_flags
from hack.devcluster.binaries import find_bin_dir
from tests import run_figures

REPO_ROOT = Path(__file__).resolve().parents[2]
MPIJOB_CRD = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
HERE = Path(__file__).resolve().parent
# 6 kwok nodes of 1,000 pods each: room for the 5,000-worker job (hack/bench/reconciler.py has 4)
NODE_POOL = NodePool(count=6, pods="1000")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the suite's tests ``integration``, and run the 5,000-worker job last: its namespace takes
    minutes to be cleaned up, and the other tests should not share the API server with that."""
    ours = [item for item in items if HERE in Path(item.path).resolve().parents]
    for item in ours:
        item.add_marker(pytest.mark.integration)
    last = [item for item in ours if item.path.name == "test_large_job.py"]
    items[:] = [item for item in items if item not in last] + last


def record(line: str) -> None:
    """A figure for the end-of-run summary (and ``$FAULT_FIGURES``, when set)."""
    run_figures.add("fault suite figures", line)
    target = os.environ.get("FAULT_FIGURES")
    if target:
        with Path(target).open("a") as out:
            out.write(line + "\n")
    print(line, flush=True)


@pytest.fixture(scope="session")
def seed() -> int:
    value = int(os.environ.get("FAULT_SEED") or random.SystemRandom().randrange(1, 10**6))
    record(f"FAULT_SEED={value}")
    return value


@pytest.fixture(scope="session")
def fault_cluster(pytestconfig: pytest.Config) -> Iterator[LocalCluster]:
    """A control plane for the fault suite only (it restarts components of it), with an audit log
    (Metadata level, blocking) at ``cluster.audit_log`` and a large node pool."""
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    logs = os.environ.get("MPIJOB_CLUSTER_LOGS")
    audit_dir = Path(tempfile.mkdtemp(prefix="mpijob-faults-audit-"))
    flags, log = audit_flags(audit_dir)
    try:
        if capture is not None:
            with capture.global_and_fixture_disabled():
                bin_dir = find_bin_dir()
        else:
            bin_dir = find_bin_dir()
        cluster = LocalCluster(nodes=NODE_POOL, bin_dir=bin_dir, apiserver_flags=flags, crds=[MPIJOB_CRD],
                               keep_logs=Path(logs) / "faults" if logs else None)
        cluster.audit_log = log
        cluster.start()
    except HarnessError as err:
        pytest.fail(f"the local control plane did not start: {err}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
        for path in audit_dir.iterdir():
            path.unlink()
        audit_dir.rmdir()


@pytest.fixture
def rng(seed: int, request: pytest.FixtureRequest) -> random.Random:
    """A generator of its own per test, derived from the run's seed and the test's name."""
    return random.Random(f"{seed}/{request.node.name}")
