"""A reconciler refused its Lease fails loudly instead of idling (issue 23).

The process runs as a ServiceAccount of the test's own namespace, bound to the ClusterRole we ship in that
namespace only (enough to start: it lists MPIJobs there), so that its refusals never show in the audit
checks of the shipped ServiceAccount (test_least_privilege.py). Without a grant on leases in its
``--lock-namespace``, it exits at start-up with one line naming the Lease, the status and what to check.
A standby whose Lease requests were allowed and then are refused (its RoleBinding deleted) keeps running,
and its ``/healthz`` fails once the refusals have lasted a lease duration (15 s), so a kubelet restarts it.
"""

from __future__ import annotations

import base64
import subprocess
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import yaml

from hack.devcluster import LocalCluster
from hack.devcluster.operators import OperatorReconciler, apply_rbac
from hack.devcluster.wait import wait_for

ACCOUNT = "lease-probe"
RBAC = "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/{plural}"
EXIT_DEADLINE = 60.0  # the process starts (imports, the MPIJob check) and makes one Lease request


def account_kubeconfig(cluster: LocalCluster, namespace: str, path: Path) -> Path:
    """A ServiceAccount of ``namespace`` bound to the shipped ClusterRole there, and a kubeconfig with its token."""
    apply_rbac(cluster)  # the ClusterRole mpi-operator
    cluster.rest.create(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ACCOUNT}})
    bind(cluster, namespace, "operator", "ClusterRole", "mpi-operator")
    token = cluster.rest.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{ACCOUNT}/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600}})["status"]["token"]
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "local", "cluster": {
            "server": cluster.server,
            "certificate-authority-data": base64.b64encode(cluster.ca_file.read_bytes()).decode()}}],
        "users": [{"name": ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": ACCOUNT, "context": {"cluster": "local", "user": ACCOUNT}}],
        "current-context": ACCOUNT,
    }
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(config))
    return path


def bind(cluster: LocalCluster, namespace: str, name: str, kind: str, role: str) -> None:
    cluster.rest.create(RBAC.format(namespace=namespace, plural="rolebindings"), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": namespace}]})


def healthz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def reconciler(cluster: LocalCluster, namespace: str, tmp_path: Path, name: str) -> OperatorReconciler:
    kubeconfig = account_kubeconfig(cluster, namespace, tmp_path / "account.kubeconfig")
    return OperatorReconciler(cluster, tmp_path, "--leader-elect=true", f"--lock-namespace={namespace}",
                              f"--namespace={namespace}", name=name, kubeconfig=kubeconfig)


def test_a_lease_refused_at_start_up_exits_with_one_clear_line(cluster: LocalCluster, namespace: str,
                                                               tmp_path: Path) -> None:
    process = reconciler(cluster, namespace, tmp_path, "refused")
    process.start()
    assert process.process is not None
    try:
        code = process.process.wait(timeout=EXIT_DEADLINE)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError(f"still running with its Lease refused; log:\n{process.tail()}") from None
    log = process.log.read_text(errors="replace")
    assert code == 1, log
    lines = [line for line in log.splitlines() if "refused the Lease" in line]
    assert len(lines) == 1, log
    for part in (f"{namespace}/mpi-operator", "403 Forbidden", "--lock-namespace", "deploy/rbac",
                 f'system:serviceaccount:{namespace}:{ACCOUNT}'):
        assert part in lines[0], lines[0]
    assert "Traceback" not in log


def test_a_standby_refused_its_lease_later_fails_health_after_a_lease_duration(cluster: LocalCluster,
                                                                              namespace: str, tmp_path: Path) -> None:
    cluster.rest.create(RBAC.format(namespace=namespace, plural="roles"), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "leases"},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                   "verbs": ["get", "create", "update"]}]})
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    cluster.rest.create(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", {  # a leader elsewhere
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "mpi-operator"},
        "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600, "acquireTime": now,
                 "renewTime": now, "leaseTransitions": 0}})
    process = reconciler(cluster, namespace, tmp_path, "standby")
    bind(cluster, namespace, "leases", "Role", "leases")
    process.start()
    try:
        wait_for(lambda: process.check_alive() and process.log_count("lease held by another") > 0, timeout=60,
                 interval=0.1, what="the standby reading the Lease")
        assert healthz(process.health_port) == (200, "ok")
        cluster.rest.delete(RBAC.format(namespace=namespace, plural="rolebindings") + "/leases")
        wait_for(lambda: process.check_alive() and healthz(process.health_port)[0] == 500, timeout=60,
                 interval=0.5, what="/healthz failing")
        status, text = healthz(process.health_port)
        assert status == 500
        assert f"leader: lease {namespace}/mpi-operator refused (403 Forbidden) for " in text, text
        assert process.alive(), "a refusal after an allowed request is retried, not fatal"
    finally:
        process.stop()
