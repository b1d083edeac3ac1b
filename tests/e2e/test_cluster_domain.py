"""`--cluster-domain` on the real node.

With `--cluster-domain=cluster.local` (upstream's e2e case) the hostfile holds full names
(`<pod>.<job>.<ns>.svc.cluster.local`), which CoreDNS resolves, and the job succeeds.

Under a custom domain the node is made a `kube.local` cluster (RealNodeCluster.custom_cluster_domain: the
kubelet's clusterDomain and CoreDNS serve `kube.local`, and `cluster.local` names do not exist) and the deployed
reconciler runs with `--cluster-domain=kube.local`. Intel MPI and MPICH need the workers' DNS search path to
reach the launcher by its short hostname: v0.8.2 hard-coded `<job>.<ns>.svc.cluster.local` there, which breaks
them in such a cluster (fixed upstream after v0.8.2, kubeflow/mpi-operator#832); ours follows the flag.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.realnode import NODE_IP, RealNodeCluster, dns_query
from tests.e2e.jobs import assert_pi, reconciler_flag, run_to_success, upstream_pi

FLAG = "--cluster-domain=cluster.local"
CUSTOM_DOMAIN = "kube.local"


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


@pytest.fixture(scope="module")
def custom_domain(real_cluster: RealNodeCluster) -> Iterator[str]:
    """The node in a `kube.local` cluster and the reconciler told so, for this module's tests; then as before."""
    with real_cluster.custom_cluster_domain(CUSTOM_DOMAIN), \
            reconciler_flag(real_cluster, f"--cluster-domain={CUSTOM_DOMAIN}"):
        yield CUSTOM_DOMAIN


def pod_exec(cluster: RealNodeCluster, namespace: str, pod: str, *argv: str) -> str:
    result = cluster.kubectl("exec", "-n", namespace, pod, "--", *argv)
    assert result.returncode == 0, f"{argv} in {pod}: {result.stdout}{result.stderr}"
    return result.stdout


@pytest.mark.parametrize("mpi", ["intel", "mpich"])
def test_intel_and_mpich_succeed_under_a_custom_cluster_domain(real_cluster: RealNodeCluster, namespace: str,
                                                               custom_domain: str, mpi: str) -> None:
    """Upstream's example (non-root, as shipped; workers kept to look inside) reaches Succeeded with every rank
    on a worker; the workers' search path is `pi.<ns>.svc.kube.local`, the names the job uses resolve under
    kube.local, and not under cluster.local (where v0.8.2's search path would have sent the workers)."""
    job = upstream_pi(mpi, "pi")
    job["spec"]["runPolicy"]["cleanPodPolicy"] = "None"
    log, _ = run_to_success(real_cluster, namespace, job)
    assert_pi(log, ["pi-worker-0", "pi-worker-1"])

    suffix = f"pi.{namespace}.svc.{custom_domain}"
    hostfile = real_cluster.rest.get(f"/api/v1/namespaces/{namespace}/configmaps/pi-config")["data"]["hostfile"]
    assert hostfile == f"pi-worker-0.{suffix}:1\npi-worker-1.{suffix}:1\n"
    for index in range(2):
        worker = real_cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods/pi-worker-{index}")
        assert worker["spec"]["dnsConfig"] == {"searches": [suffix]}, worker["spec"]
    launcher = real_cluster.rest.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/pi-launcher")
    assert "dnsConfig" not in launcher["spec"]["template"]["spec"]

    resolv = pod_exec(real_cluster, namespace, "pi-worker-0", "cat", "/etc/resolv.conf")
    assert f"search {namespace}.svc.{custom_domain} svc.{custom_domain} {custom_domain} {suffix}" in resolv, resolv
    found = pod_exec(real_cluster, namespace, "pi-worker-0", "getent", "hosts", "pi-worker-1")
    assert f"pi-worker-1.{suffix}" in found, found  # the short name, through the job's search path
    assert dns_query(NODE_IP, f"pi-worker-1.{suffix}"), "kube.local serves the job's names"
    assert dns_query(NODE_IP, f"pi-worker-1.pi.{namespace}.svc.cluster.local") == [], "cluster.local does not"
