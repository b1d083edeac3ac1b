"""Switching operators on a live cluster: the upstream Go mpi-operator v0.8.2 (built by hack/build/build-peer.sh)
and our reconciler take turns on the same Lease (``mpi-operator`` in ``mpi-operator``) while jobs run.

Go -> ours is a rolling update of the shipped Deployment over upstream's (docs/migration.md): ours starts
first and waits as a standby, the Go operator gets SIGTERM, and ours takes the Lease when the Go record
expires (v0.8.2 does not release its Lease: no ``ReleaseOnCancel``). Ours then adopts what the Go operator
made: the same worker pods (by UID), Secret, ConfigMap and Service, each launcher Job created once, and
the jobs run to Succeeded, jobs that only upstream's rules accept included (created before our webhook
was installed, they are finished and cleaned up by ours, not frozen by our stricter admission rules).
Ours -> Go is the way back: SIGTERM releases our Lease and the Go operator
takes it at its next retry. Who wrote what is read from the API server's audit log (the Go operator
runs as the cluster's admin, ours under its ServiceAccount token).
"""

from __future__ import annotations

import functools
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.audit import audit_events
from hack.devcluster.mpijobs import CONTAINER, JSON, mpijob
from hack.devcluster.operators import PEER_LOCK_NAMESPACE as LOCK_NAMESPACE
from hack.devcluster.operators import (
    PEER_VERSION,
    GoOperator,
    OperatorReconciler,
    OperatorWebhook,
    PeerBuildError,
    build_peer,
)
from hack.devcluster.wait import wait_for
from tests.integration.mpijobs import Jobs
from tests.integration.operator_fixtures import ReconcilerControl

LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{LOCK_NAMESPACE}/leases/mpi-operator"
LEASE_DURATION = 15.0
UPSTREAM_LIMITS = ("--kube-api-qps=5", "--kube-api-burst=10")
WORKERS = 32
PARTIAL = 8  # the operator being replaced is stopped once this many workers exist (of WORKERS)
ADOPTED = ("running", "partial")  # the jobs whose every pod write is accounted for


def _upstream_only_jobs() -> dict[str, JSON]:
    """Jobs the Go operator accepts and our webhook denies: a launcherCreationPolicy that is not one of the two
    values (upstream waits for the workers on anything but exactly ``AtStartup``) and a misspelt replica key
    (upstream ignores it). Their launchers still run when the operators change."""
    lenient = mpijob("lenient", 2, launcherCreationPolicy="waitForWorkersReady",
                     runPolicy={"cleanPodPolicy": "Running"}, launcher_annotations={"test.mpijob/run-for": "45s"})
    extra = mpijob("extrakey", 1, runPolicy={"cleanPodPolicy": "All"},
                   launcher_annotations={"test.mpijob/run-for": "45s"})
    extra["spec"]["mpiReplicaSpecs"]["worker"] = {"replicas": 3, "template": {"spec": {"containers": [CONTAINER]}}}
    return {"lenient": lenient, "extrakey": extra}


def _peer_binary() -> Path:
    """hack/build/build-peer.sh: the cached Go binary, built first if Go is installed; skip only without Go."""
    try:
        return build_peer(PEER_VERSION)
    except PeerBuildError as err:
        if shutil.which("go") is None:
            pytest.skip("Go is not installed: the upstream mpi-operator v0.8.2 cannot be built "
                        "(hack/build/build-peer.sh)")
        pytest.fail(str(err))


def _go_operator(binary: Path, cluster: LocalCluster, work_dir: Path) -> GoOperator:
    """v0.8.2 as upstream's manifests run it (``-alsologtostderr --lock-namespace=mpi-operator``)."""
    return GoOperator(binary, cluster, work_dir / "go.log", ["-alsologtostderr"], name="go")


@dataclass(frozen=True)
class Children:
    """What an operator made for one job: worker pods by name -> UID, and the other children's UIDs."""

    workers: dict[str, str]
    secret: tuple[str, JSON]  # uid, data
    config_map: tuple[str, str]  # uid, hostfile
    discover_hosts: str
    service: str
    launcher: str | None

    @classmethod
    def of(cls, jobs: Jobs, job: str) -> Children:
        secret, config = jobs.must("secrets", f"{job}-ssh"), jobs.must("configmaps", f"{job}-config")
        launcher = jobs.launcher(job)
        return cls({p["metadata"]["name"]: p["metadata"]["uid"] for p in jobs.workers(job)},
                   (secret["metadata"]["uid"], secret["data"]),
                   (config["metadata"]["uid"], config["data"]["hostfile"]), config["data"]["discover_hosts.sh"],
                   jobs.must("services", job)["metadata"]["uid"],
                   launcher["metadata"]["uid"] if launcher else None)


def _lease(cluster: LocalCluster) -> JSON:
    spec: JSON = cluster.rest.get(LEASE_PATH)["spec"]
    return spec


def _our_identity(process: OperatorReconciler) -> str:
    lines = [ln for ln in process.log.read_text(errors="replace").splitlines() if 'msg="became leader"' in ln]
    assert len(lines) == 1, lines
    match = re.search(r"identity=(\S+)", lines[0])
    assert match, lines[0]
    return match.group(1).strip('"')


def _assert_discover_hosts(jobs: Jobs, job: str, children: Children, *, everyone: bool, by: str) -> None:
    """upstream's format: a shebang, then ``echo <fqdn>`` per Running worker, in the order of the operator that wrote
    it last (``by``): ours lists them in index order, the Go operator sorts the names as strings (``worker-10``
    before ``worker-2``: docs/migration.md)."""
    lines = children.discover_hosts.splitlines()
    assert lines[0] == "#!/bin/sh"
    names = [line.removeprefix("echo ").removesuffix(f".{job}.{jobs.ns}.svc") for line in lines[1:]]
    index_order = sorted(names, key=lambda name: int(name.rsplit("-", 1)[1]))
    assert names == (index_order if by == "ours" else sorted(names))
    if everyone:
        assert set(names) == set(children.workers)
    else:
        assert set(names) <= set(children.workers)


def _launcher_running(jobs: Jobs, job: str) -> bool:
    pods = jobs.pods(f"training.kubeflow.org/job-name={job},training.kubeflow.org/job-role=launcher")
    return len(pods) == 1 and pods[0].get("status", {}).get("phase") == "Running"


def _running(jobs: Jobs, job: str) -> bool:
    return _launcher_running(jobs, job) and jobs.condition(job, "Running") is not None


@dataclass
class Writes:
    """The successful creates and the deletes of some jobs' objects in the audit log, by user."""

    worker_creates: dict[str, list[str]]  # worker name -> the users whose create of it was stored
    launcher_creates: dict[str, list[str]]  # launcher Job name -> the same
    pod_deletes: int
    pod_deleters: dict[str, list[str]]  # pod name -> the users whose delete of it was accepted (kwok's final
    # delete, as a kubelet's, comes after the operator's)


def _writes(cluster: LocalCluster, offset: int, namespace: str, jobs: tuple[str, ...]) -> Writes:
    assert cluster.audit_log is not None
    writes = Writes({}, {}, 0, {})
    for event in audit_events(cluster.audit_log, offset=offset):
        ref = event.get("objectRef") or {}
        name = str(ref.get("name") or "")
        if ref.get("namespace") != namespace or ref.get("subresource") or name.partition("-")[0] not in jobs:
            continue
        code = (event.get("responseStatus") or {}).get("code")
        user = str((event.get("user") or {}).get("username", ""))
        if ref.get("resource") == "pods" and event["verb"] == "delete":
            writes.pod_deletes += 1
            if code in (200, 202):
                writes.pod_deleters.setdefault(name, []).append(user)
        if event["verb"] != "create" or code != 201:
            continue
        if ref.get("resource") == "pods" and "-worker-" in name:
            writes.worker_creates.setdefault(name, []).append(user)
        if ref.get("resource") == "jobs":
            writes.launcher_creates.setdefault(name, []).append(user)
    return writes


@pytest.fixture(scope="module")
def go_binary() -> Path:
    return _peer_binary()


def _ours(cluster: LocalCluster, alone: ReconcilerControl, work_dir: Path, *extra: str) -> OperatorReconciler:
    """Our reconciler with the shipped Deployment's args (leader election on, Lease in mpi-operator)."""
    process = OperatorReconciler(cluster, work_dir, *extra, name="ours",
                                 kubeconfig=alone.refreshed_credentials().kubeconfig, as_shipped=True)
    process.start()
    return process


def _assert_adopted(jobs: Jobs, writes: Writes, ours_user: str, before: dict[str, Children],
                    after: dict[str, Children]) -> None:
    """Go -> ours: the Go operator's children kept (same UIDs, same Secret and hostfile), the rest made by
    ours, every worker and launcher Job created exactly once, nothing deleted."""
    for job in ("running", "partial"):
        old, new = before[job], after[job]
        assert old.workers.items() <= new.workers.items(), f"{job}: the Go operator's worker pods kept, same UIDs"
        assert (new.secret, new.config_map, new.service) == (old.secret, old.config_map, old.service), job
    assert len(after["running"].workers) == 16
    assert len(after["partial"].workers) == WORKERS
    assert after["running"].launcher == before["running"].launcher
    # The running job's ConfigMap as the Go operator left it (all 16 workers Running), its hosts put in index order.
    assert sorted(after["running"].discover_hosts.splitlines()) == sorted(before["running"].discover_hosts.splitlines())
    _assert_discover_hosts(jobs, "running", after["running"], everyone=True, by="ours")
    _assert_discover_hosts(jobs, "partial", after["partial"], everyone=False, by="ours")
    print(f"\nthe Go operator made {len(before['partial'].workers)} of the {WORKERS} workers of 'partial'")
    launcher_pods = jobs.pods("training.kubeflow.org/job-name=running,training.kubeflow.org/job-role=launcher")
    assert len(launcher_pods) == 1, "the running launcher was neither replaced nor restarted"

    assert writes.pod_deletes == 0
    assert all(len(users) == 1 for users in writes.worker_creates.values()), "every worker created once"
    created_by = {name: users[0] for name, users in writes.worker_creates.items()}
    assert set(created_by) == set(after["partial"].workers) | set(after["running"].workers)
    assert {n for n, u in created_by.items() if u != ours_user} == set(before["partial"].workers) | set(
        before["running"].workers), "the Go operator made exactly the workers seen before the handover"
    assert writes.launcher_creates == {"running-launcher": [next(u for u in created_by.values() if u != ours_user)],
                                       "partial-launcher": [ours_user]}


def test_go_operator_to_ours_mid_job(cluster: LocalCluster, namespace: str, alone: ReconcilerControl,
                                     webhook: OperatorWebhook, go_binary: Path, tmp_path: Path) -> None:
    assert cluster.audit_log is not None
    offset = cluster.audit_log.stat().st_size if cluster.audit_log.exists() else 0
    jobs = Jobs(cluster, namespace)
    go = _go_operator(go_binary, cluster, tmp_path)
    ours: OperatorReconciler | None = None
    webhook.unregister()  # the cluster as it was under the Go operator alone: no webhook of ours yet
    try:
        go.start()
        wait_for(lambda: go.logged("Leading started"), timeout=LEASE_DURATION + 30, interval=0.2,
                 what="the Go operator to lead")
        go_lease = _lease(cluster)
        go_identity = str(go_lease["holderIdentity"])
        assert go_identity
        assert go_lease["leaseDurationSeconds"] == LEASE_DURATION

        # "running": its launcher is running when the operators change; "partial": caught mid-creation
        jobs.create(mpijob("running", 16, runPolicy={"cleanPodPolicy": "None"},
                           launcher_annotations={"test.mpijob/run-for": "45s"}))
        for manifest in _upstream_only_jobs().values():
            jobs.create(manifest)
        for job in ("running", *_upstream_only_jobs()):
            wait_for(functools.partial(_running, jobs, job), timeout=60, interval=0.2,
                     what=f"the {job} job's launcher Running under the Go operator")
        # Installing ours: the webhook first, then the rolling update of the reconciler: ours first, a standby
        # while the Go operator renews; then the Go pod's SIGTERM.
        webhook.register()
        ours = _ours(cluster, alone, tmp_path)
        wait_for(lambda: ours is not None and ours.check_alive() and ours.log_count("lease held by another") == 1,
                 timeout=30, interval=0.2, what="ours to wait on the Go operator's Lease")
        jobs.create(mpijob("partial", WORKERS, runPolicy={"cleanPodPolicy": "None"}))
        wait_for(lambda: len(jobs.workers("partial")) >= PARTIAL, timeout=60, interval=0.05,
                 what=f"{PARTIAL} workers created by the Go operator")
        assert go.terminate() == 255  # v0.8.2: klog.Fatalf("Leader election stopped") once its context ends
        before = {job: Children.of(jobs, job) for job in ("running", "partial")}
        # Not released: the Go record stays until it expires, and ours has not led yet.
        assert _lease(cluster)["holderIdentity"] == go_identity
        assert ours.log_count("became leader") == 0
        assert PARTIAL <= len(before["partial"].workers) < WORKERS, "stopped mid-creation"
        assert before["partial"].launcher is None
        assert before["running"].launcher is not None
        assert len(before["running"].workers) == 16

        wait_for(lambda: ours is not None and ours.check_alive() and ours.log_count("became leader") == 1,
                 timeout=LEASE_DURATION + 10, interval=0.2, what="ours to take the expired Lease")
        ours_lease = _lease(cluster)
        assert ours_lease["holderIdentity"] == _our_identity(ours) != go_identity
        assert ours_lease["leaseTransitions"] == go_lease["leaseTransitions"] + 1
        for job in ("partial", "running", *_upstream_only_jobs()):
            jobs.wait_condition(job, "Succeeded", timeout=90)
        for job in _upstream_only_jobs():  # finished by ours: cleanPodPolicy Running / All applied
            jobs.wait_workers(job, 0)
            assert [e["reason"] for e in jobs.events(job)] == ["MPIJobCreated", "MPIJobRunning", "MPIJobSucceeded"]
        assert ours.alive()
        after = {job: Children.of(jobs, job) for job in ("running", "partial")}
    finally:
        webhook.register()
        go.stop()
        if ours is not None:
            ours.stop()

    _assert_adopted(jobs, _writes(cluster, offset, namespace, ADOPTED), alone.credentials.username, before, after)
    _assert_upstream_only_finished(_writes(cluster, offset, namespace, tuple(_upstream_only_jobs())),
                                   alone.credentials.username)


def _assert_upstream_only_finished(writes: Writes, ours_user: str) -> None:
    """The jobs only upstream accepts: made by the Go operator, each object once; their workers released by ours
    when they finished (cleanPodPolicy Running / All), each deleted once."""
    assert sorted(writes.worker_creates) == ["extrakey-worker-0", "lenient-worker-0", "lenient-worker-1"]
    assert all(len(users) == 1 and users != [ours_user] for users in
               [*writes.worker_creates.values(), *writes.launcher_creates.values()]), "all made once, by Go"
    assert sorted(writes.launcher_creates) == ["extrakey-launcher", "lenient-launcher"]
    deleted_by_ours = {name: users.count(ours_user) for name, users in writes.pod_deleters.items()
                       if ours_user in users}
    assert deleted_by_ours == {"lenient-worker-0": 1, "lenient-worker-1": 1, "extrakey-worker-0": 1}, (
        f"every pod delete accepted, by pod: {writes.pod_deleters}")


def test_ours_to_go_operator_mid_job(cluster: LocalCluster, namespace: str, alone: ReconcilerControl,
                                     go_binary: Path, tmp_path: Path) -> None:
    assert cluster.audit_log is not None
    offset = cluster.audit_log.stat().st_size if cluster.audit_log.exists() else 0
    jobs = Jobs(cluster, namespace)
    # At upstream's client limits, so that the handover falls in the middle of the worker creates.
    ours = _ours(cluster, alone, tmp_path, *UPSTREAM_LIMITS)
    go = _go_operator(go_binary, cluster, tmp_path)
    try:
        wait_for(lambda: ours.check_alive() and ours.log_count("became leader") == 1, timeout=LEASE_DURATION + 30,
                 interval=0.2, what="ours to lead")
        ours_identity = _our_identity(ours)
        ours_lease = _lease(cluster)
        assert ours_lease["holderIdentity"] == ours_identity
        go.start()
        wait_for(lambda: go.logged(f"New leader has been elected: {ours_identity}"), timeout=30, interval=0.2,
                 what="the Go operator to wait on our Lease")
        jobs.create(mpijob("back", WORKERS, runPolicy={"cleanPodPolicy": "None"}))
        wait_for(lambda: len(jobs.workers("back")) >= PARTIAL, timeout=60, interval=0.05,
                 what=f"{PARTIAL} workers created by ours")
        ours.stop()
        assert not ours.alive()
        assert ours.log_count("lease released") == 1
        # ours' children (the Go operator may already have added some: it takes the Lease within about 3 s)
        before = Children.of(jobs, "back")
        wait_for(lambda: go.logged("Leading started"), timeout=10, interval=0.1,
                 what="the Go operator to take the released Lease at its next retry (3 s, jittered)")
        go_lease = _lease(cluster)
        assert go_lease["holderIdentity"] not in ("", ours_identity)
        assert go_lease["leaseTransitions"] == ours_lease["leaseTransitions"] + 1
        jobs.wait_condition("back", "Succeeded", timeout=90)
        go.check_alive()
        after = Children.of(jobs, "back")
    finally:
        ours.stop()
        go.stop()

    assert before.workers.items() <= after.workers.items(), "our worker pods kept, same UIDs"
    assert len(after.workers) == WORKERS
    assert (after.secret, after.config_map, after.service) == (before.secret, before.config_map, before.service)
    _assert_discover_hosts(jobs, "back", after, everyone=False, by="go")
    writes = _writes(cluster, offset, namespace, ("back",))
    ours_user = alone.credentials.username
    assert writes.pod_deletes == 0
    assert all(len(users) == 1 for users in writes.worker_creates.values()), "every worker created once"
    assert set(writes.worker_creates) == set(after.workers)
    ours_created = {n for n, users in writes.worker_creates.items() if users == [ours_user]}
    assert ours_created <= set(before.workers), "ours created nothing after it stopped"
    assert PARTIAL <= len(ours_created) < WORKERS, "ours handed over a job it had partly created"
    assert list(writes.launcher_creates) == ["back-launcher"]
    assert writes.launcher_creates["back-launcher"] != [ours_user], "the Go operator created the launcher, once"
