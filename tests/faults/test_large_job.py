"""A 5,000-worker job on kwok nodes runs to completion (issue 7, "large objects crash the informer").

Its hostfile ConfigMap (hostfile and discover_hosts.sh, one line per worker) is over 512 KiB, and so is
every watch event carrying it: the informer must stream such events instead of failing on aiohttp's
line limit (``LineTooLong``) and crash-looping. The job must complete with the reconciler never
exiting, every worker created exactly once and nothing left behind. Only in ``make faults``: the
run takes minutes on two cores. The reconciler runs with its default flags.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.rest import JSON, RestClient, client_context
from hack.devcluster.supervisor import SupervisedReconciler, tail
from hack.devcluster.wait import wait_for
from tests.faults.conftest import record
from tests.faults.workload import (
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
    percentile,
    workers_now,
    write_summary,
    writes_by_reconciler,
)

WORKERS = 5000
HALF_MIB = 512 * 1024


@pytest.mark.faults
@pytest.mark.timeout(1800)
def test_5000_worker_job_with_a_hostfile_over_512_kib(fault_cluster: LocalCluster, tmp_path: Path) -> None:
    cluster = fault_cluster
    namespace = create_namespace(cluster, f"faults-large-hostfile-{uuid.uuid4().hex[:5]}")
    name = "large-hostfile-job"
    offset = audit_size(cluster)
    reconciler = SupervisedReconciler(cluster, tmp_path / "reconciler")
    rest = RestClient(cluster.server, client_context(cluster.ca_file, cluster.admin_cert, cluster.admin_key),
                      timeout=120)  # a busy API server answers large lists slowly
    try:
        with reconciler:
            reconciler.wait_synced()
            began = time.monotonic()
            rest.create(mpijobs_path(namespace), mpijob(name, WORKERS,
                                                        launcher_labels={"test.mpijob/outcome": "hang"}))

            def exits() -> str:
                return "; ".join(f"run {e.run} exit {e.code}: {tail(e.tail, 5)}" for e in reconciler.unexpected_exits)

            def job() -> JSON:
                """The MPIJob (the suite's own polling stays light: 5,000 pods are not listed every poll)."""
                assert not reconciler.unexpected_exits, exits()
                found: JSON = rest.get(mpijobs_path(namespace, name))
                return found

            def workers(status: str) -> int:
                count = ((job().get("status") or {}).get("replicaStatuses") or {}).get("Worker", {}).get(status, 0)
                return int(count)

            wait_for(lambda: rest.get(core_path(namespace, "configmaps") + f"?limit=1&fieldSelector=metadata.name="
                                      f"{name}-config")["items"], timeout=120, interval=1, what="the ConfigMap")
            wait_for(lambda: workers("active") == WORKERS, timeout=900, interval=5,
                     what=f"{WORKERS} workers active")
            all_active = time.monotonic() - began
            wait_for(lambda: condition(job(), "Running") == "True", timeout=300, interval=2, what="the job Running")
            config = rest.get(core_path(namespace, "configmaps") + f"/{name}-config")
            size = sum(len(v.encode()) for v in config["data"].values())
            assert size > HALF_MIB, f"the ConfigMap's data is only {size} bytes"
            assert len(config["data"]["hostfile"].splitlines()) == WORKERS
            launcher = rest.get(core_path(namespace, "pods") + "?labelSelector=training.kubeflow.org/"
                                f"job-role=launcher,training.kubeflow.org/job-name={name}")["items"][0]
            rest.merge_patch(core_path(namespace, "pods") + f"/{launcher['metadata']['name']}",
                             {"metadata": {"labels": {"test.mpijob/outcome": "succeed"}}})
            wait_for(lambda: condition(job(), "Succeeded") == "True", timeout=300, interval=2, what="Succeeded")
            succeeded = time.monotonic() - began
            wait_for(lambda: not workers_now(cluster, namespace).get(name), timeout=900, interval=10,
                     what="the workers deleted (cleanPodPolicy Running)")
            done = time.monotonic() - began
            cpu, syncs = reconciler.cpu_seconds(), reconciler.sync_durations()
            orphans, gc_seconds = delete_all_and_wait_for_gc(cluster, namespace, timeout=600)
        events = audit_in(cluster, namespace, offset)
        writes = writes_by_reconciler(events)
        plan = JobPlan(name, WORKERS, "OpenMPI", "Running", False, False, False, False, 0, 0)
        record(f"large job: W={WORKERS}, ConfigMap data {size / 1024:.0f} KiB; all workers active after "
               f"{all_active:.0f} s, Succeeded {succeeded:.0f} s, workers cleaned up {done:.0f} s "
               f"after the POST; GC {gc_seconds:.0f} s; {len(reconciler.unexpected_exits)} reconciler exits; "
               f"{sum(writes.values())} writes ({write_summary(writes)})")
        record(f"  reconciler: {cpu:.0f} CPU-seconds; {len(syncs)} syncs, p50 {percentile(syncs, 0.5):.0f} ms, "
               f"p90 {percentile(syncs, 0.9):.0f} ms, max {max(syncs, default=0):.0f} ms, "
               f"{sum(syncs) / 1000:.0f} s in all")
        assert reconciler.unexpected_exits == [], exits()
        assert duplicates(events) == {}
        assert lost_or_foreign_workers(events, [plan]) == {}
        assert orphans == []
    finally:
        delete_namespace(cluster, namespace)
