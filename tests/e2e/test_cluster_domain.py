"""The deployed reconciler started with `--cluster-domain=cluster.local`: the hostfile then holds full
names (`<pod>.<job>.<ns>.svc.cluster.local`), which CoreDNS resolves, and the job succeeds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hack.devcluster import LocalCluster
from tests.e2e.jobs import assert_pi, reconciler_flag, run_to_success, upstream_pi

FLAG = "--cluster-domain=cluster.local"


@pytest.fixture
def cluster_domain(real_cluster: LocalCluster) -> Iterator[None]:
    with reconciler_flag(real_cluster, FLAG):
        yield


@pytest.mark.usefixtures("cluster_domain")
def test_cluster_domain_fqdns_resolve_and_the_job_succeeds(real_cluster: LocalCluster, namespace: str) -> None:
    log, _ = run_to_success(real_cluster, namespace, upstream_pi("openmpi", "pi"))
    config = real_cluster.rest.get(f"/api/v1/namespaces/{namespace}/configmaps/pi-config")
    assert config["data"]["hostfile"].splitlines()[0].startswith(f"pi-worker-0.pi.{namespace}.svc.cluster.local"), \
        config["data"]["hostfile"]
    assert_pi(log, ["pi-worker-0", "pi-worker-1"])
