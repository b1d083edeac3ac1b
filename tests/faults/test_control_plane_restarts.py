"""kube-apiserver and etcd restarted in the middle of a large job (issue 7).

The kube-apiserver is restarted (SIGTERM, started again on the same port and data) while the
reconciler creates the job's workers; its new watch cache no longer holds the resourceVersions the
informers resume from, so they get ``410 Expired`` and must relist. etcd is SIGKILLed and started
again when the launcher is made to finish, so that the job's completion and its workers' cleanup
happen across the outage. The job must complete with every worker created exactly once and nothing
left behind. From the audit log: the watches and lists the reconciler made after each restart.

The reconciler runs with its default flags (no client-side rate limit; on two cores the restart
still lands while it creates the workers of a 256-worker job). With leader election on (the
default), an API server outage longer than the renew deadline (5 s) makes it give up the Lease, drop
its caches and campaign again in-process (it used to exit, as upstream does); its next term lists
afresh. So that the informers' own resume and relist is what is tested, the short version runs with
``--leader-elect=false``; the full suite also runs everything at the defaults. Either way the
process must never exit (tests/faults/test_api_outage.py has the one-minute outage).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.audit import audit_events, resource_of
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.supervisor import SupervisedReconciler, tail
from hack.devcluster.wait import wait_for
from tests.faults.conftest import record
from tests.faults.workload import (
    USER_AGENT,
    JobPlan,
    audit_in,
    audit_size,
    condition,
    core_path,
    create_namespace,
    delete_all_and_wait_for_gc,
    delete_namespace,
    duplicates,
    lost_or_foreign_workers,
    mpijobs_path,
    workers_now,
    write_summary,
    writes_by_reconciler,
)

HANG = {"test.mpijob/outcome": "hang"}
JSON = dict[str, Any]


def reads_after(cluster: LocalCluster, offset: int) -> dict[str, dict[str, int]]:
    """verb -> resource -> how many lists and watches the reconciler made, from byte ``offset`` of the
    audit log on (a watch is logged when its response starts and again when it ends: counted once)."""
    assert cluster.audit_log is not None
    seen: dict[str, dict[str, set[str]]] = {"list": {}, "watch": {}}
    for e in audit_events(cluster.audit_log, offset=offset):
        if str(e.get("userAgent", "")).startswith(USER_AGENT) and e.get("verb") in seen:
            seen[e["verb"]].setdefault(resource_of(e), set()).add(str(e.get("auditID")))
    return {verb: {res: len(ids) for res, ids in per.items()} for verb, per in seen.items()}


def worker_pods(cluster: LocalCluster, namespace: str, name: str, role: str = "worker") -> list[JSON]:
    selector = f"training.kubeflow.org/job-role={role},training.kubeflow.org/job-name={name}"
    items: list[JSON] = cluster.rest.get(core_path(namespace, "pods") + f"?labelSelector={selector}")["items"]
    return items


@dataclass
class Phase:
    """One restart: what it cost and what the reconciler did after it."""

    component: str
    took: float = 0.0
    recovered: float = 0.0  # seconds from the component being back to the job's next milestone
    reads: dict[str, dict[str, int]] = field(default_factory=dict)
    process_restarted: bool = False
    new_term: bool = False  # the Lease was lost and taken back in-process: the next term listed afresh

    def describe(self) -> str:
        kept = "kept running" + (" (Lease lost, new term)" if self.new_term else "")
        return (f"{self.component} back after {self.took:.1f} s, job milestone {self.recovered:.1f} s later; "
                f"reconciler {'restarted' if self.process_restarted else kept}; "
                f"its lists {self.reads.get('list')}, watches {self.reads.get('watch')}")


def restart_during(cluster: LocalCluster, reconciler: SupervisedReconciler, component: str,
                   milestone: Callable[[], bool], *, kill: bool = False) -> Phase:
    """Restart ``component``, then wait for ``milestone``; the reconciler's reads from the restart on."""
    phase, offset, runs = Phase(component), audit_size(cluster), len(reconciler.runs)
    terms = reconciler.all_logs().count("campaigning again")
    phase.took = cluster.restart(component, kill=kill, down_for=2.0 if kill else 0.0)
    back = time.monotonic()
    wait_for(milestone, timeout=300, interval=0.5, what=f"the job's next milestone after the {component} restart")
    phase.recovered = time.monotonic() - back
    phase.reads = reads_after(cluster, offset)
    phase.process_restarted = len(reconciler.runs) > runs
    phase.new_term = reconciler.all_logs().count("campaigning again") > terms
    return phase


def restart_suite(cluster: LocalCluster, tmp_path: Path, *, workers: int, restart_etcd: bool,
                  leader_elect: bool) -> None:
    namespace = create_namespace(cluster, f"faults-restarts-{uuid.uuid4().hex[:5]}")
    flags = () if leader_elect else ("--leader-elect=false",)
    name, began, offset = f"restart-w{workers}", time.monotonic(), audit_size(cluster)
    reconciler = SupervisedReconciler(cluster, tmp_path / "reconciler", flags)

    def all_running() -> bool:
        pods = worker_pods(cluster, namespace, name)
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        job = cluster.rest.get(mpijobs_path(namespace, name))
        return len(running) == workers and condition(job, "Running") == "True"

    def finished() -> bool:
        done = condition(cluster.rest.get(mpijobs_path(namespace, name)), "Succeeded") == "True"
        return done and not workers_now(cluster, namespace).get(name)

    try:
        with reconciler:
            reconciler.wait_synced()
            cluster.rest.create(mpijobs_path(namespace), mpijob(name, workers, launcher_labels=HANG))
            at_restart = wait_for(lambda: (n := workers_now(cluster, namespace).get(name, 0)) >= workers // 4 and n,
                                  timeout=120, interval=0.05, what=f"a quarter of the {workers} workers")
            phases = [restart_during(cluster, reconciler, "kube-apiserver", all_running)]
            config = cluster.rest.get(core_path(namespace, "configmaps") + f"/{name}-config")
            launcher = worker_pods(cluster, namespace, name, "launcher")[0]
            cluster.rest.merge_patch(core_path(namespace, "pods") + f"/{launcher['metadata']['name']}",
                                     {"metadata": {"labels": {"test.mpijob/outcome": "succeed"}}})
            if restart_etcd:
                phases.append(restart_during(cluster, reconciler, "etcd", finished, kill=True))
            wait_for(finished, timeout=300, interval=0.5, what="the job Succeeded and its workers deleted")
            orphans, gc_seconds = delete_all_and_wait_for_gc(cluster, namespace)
        events = audit_in(cluster, namespace, offset)
        writes = writes_by_reconciler(events)
        record(f"restarts (W={workers}, leader election {'on' if leader_elect else 'off'}): API server "
               f"restarted (SIGTERM) at {at_restart}/{workers} workers created"
               + (", etcd SIGKILLed (down 2 s) as the launcher finished" if restart_etcd else ""))
        for phase in phases:
            record(f"  {phase.describe()}")
        record(f"  {time.monotonic() - began:.0f} s in all, {len(reconciler.unexpected_exits)} reconciler exits, "
               f"GC {gc_seconds:.0f} s, {sum(writes.values())} writes: {write_summary(writes)}")
        plan = JobPlan(name, workers, "OpenMPI", "Running", False, False, False, False, 0, 0)
        assert len(config["data"]["hostfile"].splitlines()) == workers
        assert duplicates(events) == {}
        assert lost_or_foreign_workers(events, [plan]) == {}
        assert orphans == []
        if phases[0].new_term:  # the Lease lost: the next term listed everything afresh
            assert phases[0].reads["list"].get("pods", 0) >= 1, phases[0].reads
        elif not phases[0].process_restarted:  # the same process resumed its watches; it relists where the API
            # server answered 410 (the resourceVersion no longer in its watch cache), and only there
            assert phases[0].reads["watch"].get("pods", 0) >= 1, phases[0].reads
            relisted = 'msg="watch expired, relisting" resource=pods' in reconciler.all_logs()
            assert (phases[0].reads["list"].get("pods", 0) >= 1) == relisted, phases[0].reads
        assert reconciler.unexpected_exits == [], [f"exit {e.code}: {tail(e.tail)}"
                                                   for e in reconciler.unexpected_exits]
    finally:
        delete_namespace(cluster, namespace)


@pytest.mark.timeout(600)
def test_api_server_restarted_mid_creation_short(fault_cluster: LocalCluster, tmp_path: Path) -> None:
    restart_suite(fault_cluster, tmp_path, workers=64, restart_etcd=False, leader_elect=False)


@pytest.mark.faults
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("leader_elect", [False, True], ids=["leader-elect-off", "defaults"])
def test_api_server_and_etcd_restarted_in_a_256_worker_job(fault_cluster: LocalCluster, tmp_path: Path,
                                                           leader_elect: bool) -> None:
    restart_suite(fault_cluster, tmp_path, workers=256, restart_etcd=True, leader_elect=leader_elect)
