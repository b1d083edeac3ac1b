"""The deployed reconciler started with `--cluster-domain=cluster.local`: the hostfile then holds full
names (`<pod>.<job>.<ns>.svc.cluster.local`), which CoreDNS resolves, and the job succeeds."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.operator_deploy import NAMESPACE, RECONCILER, lease_holder
from hack.devcluster.wait import wait_for
from tests.e2e.jobs import assert_pi, run_to_success, upstream_pi

FLAG = "--cluster-domain=cluster.local"


def _rolled_out(cluster: LocalCluster, with_flag: bool) -> bool:
    dep = cluster.rest.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{RECONCILER}")
    status = dep.get("status") or {}
    pods = cluster.rest.get(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app.kubernetes.io/name={RECONCILER}")
    running = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")
               and (p.get("status") or {}).get("phase") == "Running"
               and (FLAG in p["spec"]["containers"][0].get("args", [])) == with_flag]
    return (status.get("updatedReplicas") == status.get("replicas") == status.get("availableReplicas") == 1
            and status.get("observedGeneration") == dep["metadata"]["generation"] and len(running) == len(
                pods["items"]) == 1 and lease_holder(cluster).startswith(running[0]["metadata"]["name"]))


def _set_flag(cluster: LocalCluster, on: bool) -> None:
    dep = cluster.rest.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{RECONCILER}")
    args = [a for a in dep["spec"]["template"]["spec"]["containers"][0].get("args", []) if a != FLAG]
    patch = [{"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": [*args, FLAG] if on else args}]
    cluster.kubectl("-n", NAMESPACE, "patch", "deployment", RECONCILER, "--type=json", "-p", json.dumps(patch),
                    check=True)
    state = "with" if on else "without"
    wait_for(lambda: _rolled_out(cluster, on), 120, 0.5, what=f"the reconciler rolled out {state} {FLAG}, leading")


@pytest.fixture
def cluster_domain(real_cluster: LocalCluster) -> Iterator[None]:
    _set_flag(real_cluster, True)
    try:
        yield
    finally:
        _set_flag(real_cluster, False)


@pytest.mark.usefixtures("cluster_domain")
def test_cluster_domain_fqdns_resolve_and_the_job_succeeds(real_cluster: LocalCluster, namespace: str) -> None:
    log, _ = run_to_success(real_cluster, namespace, upstream_pi("openmpi", "pi"))
    config = real_cluster.rest.get(f"/api/v1/namespaces/{namespace}/configmaps/pi-config")
    assert config["data"]["hostfile"].splitlines()[0].startswith(f"pi-worker-0.pi.{namespace}.svc.cluster.local"), \
        config["data"]["hostfile"]
    assert_pi(log, ["pi-worker-0", "pi-worker-1"])
