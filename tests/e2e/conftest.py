"""End-to-end tests on a real node: MPI jobs whose pods really run (hack/devcluster/realnode.py).

One cluster for the package (started at the first e2e test, stopped after the last one, so that it
does not overlap the integration suite's session cluster): control plane, the real node with our
images imported, our operator deployed from its images (Dockerfile.webhook, Dockerfile.reconciler)
as pods in mpi-operator, as an admin deploys it with kustomize: the CRD first (deploy/crds/), then deploy/.
Tests that take the operator away (test_helm.py, test_uninstall.py) deploy it again the same way before they
end. Needs Linux and root; elsewhere every test is skipped with the reason. The binaries and images are
built (once, cached) by `make node-images`, which `make test` runs first; the fixture builds them too when
called alone.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hack.devcluster import HarnessError
from hack.devcluster.binaries import find_bin_dir
from hack.devcluster.operator_deploy import deploy, operator_image_archives
from hack.devcluster.realnode import RealNodeCluster, image_archives, node_bin_dir, unavailable

HERE = Path(__file__).resolve().parent
DEPLOY_TIMINGS: dict[str, float] = {}  # seconds from `kubectl apply -k` to each step, for the report


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.timeout(600))


@pytest.fixture(scope="package")
def real_cluster(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNodeCluster]:
    """The control plane plus the real node, with our operator deployed from its own images by
    `kubectl apply --server-side -k`, the CRD (deploy/crds/) first (hack/devcluster/operator_deploy.py)."""
    reason = unavailable()
    if reason:
        pytest.skip(f"no real node here: {reason}")
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    logs = os.environ.get("MPIJOB_CLUSTER_LOGS")
    try:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            bin_dir, node_bin = find_bin_dir(), node_bin_dir()
            images = image_archives() + operator_image_archives()
        cluster = RealNodeCluster(bin_dir=bin_dir, node_bin_dir=node_bin, images=images,
                                  keep_logs=Path(logs) / "e2e" if logs else None)
        cluster.start()
    except HarnessError as err:
        pytest.fail(f"the real-node cluster did not start: {err}", pytrace=False)
    try:
        DEPLOY_TIMINGS.update(deploy(cluster, tmp_path_factory.mktemp("e2e-operator")))
        yield cluster
    except HarnessError as err:
        pytest.fail(f"the operator did not deploy: {err}", pytrace=False)
    finally:
        cluster.stop()


@pytest.fixture
def namespace(real_cluster: RealNodeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"e2e-{request.node.name.lower().replace('_', '-')[:40].strip('-')}-{uuid.uuid4().hex[:5]}"
    name = "".join(ch if ch.isalnum() or ch == "-" else "-" for ch in name)
    real_cluster.kubectl("create", "namespace", name, check=True)
    yield name
    real_cluster.kubectl("delete", "namespace", name, "--wait=false")
