"""Issue 37: the IndexedJob worker backend's native gang, made by kube-controller-manager's Job controller
(docs/reconciler.md, "Worker backends"). With the WorkloadWithJob gate (Kubernetes 1.36, alpha) the Job controller
gives a new Indexed Job whose parallelism equals its completions (more than one) a scheduling.k8s.io/v1alpha2
Workload and a PodGroup whose gang is every pod of the Job, and names that PodGroup on each pod; kube-scheduler
(GangScheduling) then binds the workers all or none. Our reconciler runs with no ``--gang-scheduling``: the gang is
the workers, the launcher is outside it.

This module runs on a control plane of its own, the harness's gates plus WorkloadWithJob in kube-apiserver,
kube-controller-manager and kube-scheduler, with our webhook and reconciler as the session runs them
(operator_fixtures). The jobs run on kwok nodes of their own (tests/integration/gangs.py), sized so that a job fits
or does not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.operators import OperatorWebhook
from tests.integration.conftest import MPIJOB_CRD, keep_events, namespace_name
from tests.integration.gangs import bound, gang_nodes, pool_job, refused
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl

JSON = dict[str, Any]
HANG = {"test.mpijob/outcome": "hang"}  # kwok otherwise completes every pod a Job owns
BACKEND = "mpijobs.kubeflow.org/worker-backend"
GATE = "WorkloadWithJob=true"
SCHEDULING = "scheduling.k8s.io/v1alpha2"
BATCH = "batch/v1"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """A control plane with WorkloadWithJob on, for this module alone (the session's stays as it is)."""
    logs = os.environ.get("MPIJOB_CLUSTER_LOGS")
    local = LocalCluster(nodes=1, crds=[MPIJOB_CRD], feature_gates=(GATE,),
                         keep_logs=Path(logs) / "indexed-job-gang" if logs else None)
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def reconciler(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReconcilerControl]:
    """Our webhook (registered as shipped) and reconciler (its shipped RBAC, a ServiceAccount token), no gang flag."""
    work_dir = tmp_path_factory.mktemp("indexed-job-gang")
    webhook = OperatorWebhook(cluster, work_dir)
    webhook.start()
    try:
        webhook.wait_ready()
        webhook.register()
        control = ReconcilerControl(cluster, work_dir)
        try:
            yield control
        finally:
            control.stop()
    finally:
        webhook.unregister()
        webhook.stop()


@pytest.fixture
def namespace(cluster: LocalCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = namespace_name(request.node.name)
    cluster.rest.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        keep_events(cluster, name)
        cluster.rest.request("DELETE", f"/api/v1/namespaces/{name}", {"propagationPolicy": "Background"})


@pytest.fixture
def jobs(cluster: LocalCluster, namespace: str, reconciler: ReconcilerControl) -> Jobs:
    return Jobs(cluster, namespace)


def indexed_job(name: str, pool: str, workers: int, **spec: Any) -> JSON:
    """An MPIJob on the IndexedJob backend whose pods (1 CPU each) run on ``pool``'s nodes until deleted."""
    job = pool_job(name, pool, workers, launcher_labels=HANG, **spec)
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"] = {"labels": dict(HANG)}
    job["metadata"]["annotations"] = {BACKEND: "IndexedJob"}
    return job


def listed(jobs: Jobs, plural: str) -> list[JSON]:
    items: list[JSON] = jobs.cluster.rest.get(jobs.path(plural, group=SCHEDULING))["items"]
    return items


def owner(obj: JSON, api_version: str, kind: str, *, controller: bool) -> JSON:
    ref = {"apiVersion": api_version, "kind": kind, "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"]}
    return {**ref, "controller": True, "blockOwnerDeletion": True} if controller else ref


def the_gang(jobs: Jobs, mpijob: str, workers: int) -> tuple[JSON, JSON]:
    """The namespace's one Workload and one PodGroup, once both exist, checked whole against what the Job controller
    makes for the worker Job ``<mpijob>-worker``: a gang of ``workers`` pods, owned via that Job."""
    worker_job = until(lambda: jobs.object("jobs", f"{mpijob}-worker", BATCH), timeout=60, what="the worker Job")
    name = worker_job["metadata"]["name"]

    def both() -> tuple[list[JSON], list[JSON]] | None:
        found = listed(jobs, "workloads"), listed(jobs, "podgroups")
        return found if all(found) else None

    workloads, groups = until(both, timeout=60, what="the Workload and the PodGroup")
    assert (len(workloads), len(groups)) == (1, 1), "exactly one Workload and one PodGroup"
    workload, group = workloads[0], groups[0]
    template = f"{name}-pgt-0"
    assert re.fullmatch(rf"{name}-[0-9a-z]+", workload["metadata"]["name"]), workload["metadata"]["name"]
    assert re.fullmatch(rf"{workload['metadata']['name']}-{template}-[0-9a-z]+", group["metadata"]["name"]), (
        group["metadata"]["name"])
    assert {"ownerReferences": workload["metadata"]["ownerReferences"], "spec": workload["spec"]} == {
        "ownerReferences": [owner(worker_job, BATCH, "Job", controller=True)],
        "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": name},
                 "podGroupTemplates": [{"name": template, "schedulingPolicy": {"gang": {"minCount": workers}},
                                        "schedulingConstraints": None}]}}
    assert {"ownerReferences": group["metadata"]["ownerReferences"], "finalizers": group["metadata"].get("finalizers"),
            "spec": group["spec"]} == {
        "ownerReferences": [owner(worker_job, BATCH, "Job", controller=True),
                            owner(workload, SCHEDULING, "Workload", controller=False)],
        "finalizers": ["scheduling.k8s.io/podgroup-protection"],
        "spec": {"podGroupTemplateRef": {"workload": {"workloadName": workload["metadata"]["name"],
                                                      "podGroupTemplateName": template}},
                 "schedulingPolicy": {"gang": {"minCount": workers}}, "disruptionMode": "Pod"}}
    return workload, group


def launcher_pod(jobs: Jobs, mpijob: str) -> JSON | None:
    """The launcher Job's one pod, once it exists."""
    pods = jobs.pods(f"training.kubeflow.org/job-name={mpijob},training.kubeflow.org/job-role=launcher")
    assert len(pods) <= 1, [p["metadata"]["name"] for p in pods]
    return pods[0] if pods else None


def running_pods(jobs: Jobs, mpijob: str, workers: int, timeout: float = 90) -> tuple[list[JSON], JSON]:
    """The job's workers and its launcher pod once all of them are Running."""
    def found() -> tuple[list[JSON], JSON] | None:
        pods, launcher = jobs.workers(mpijob), launcher_pod(jobs, mpijob)
        phases = [p["status"].get("phase") for p in pods]
        if launcher is None or launcher["status"].get("phase") != "Running" or phases != ["Running"] * workers:
            return None
        return pods, launcher

    return until(found, timeout=timeout, what=f"{workers} Running workers and the launcher of {mpijob}")


def gang_members(pods: list[JSON]) -> list[JSON | None]:
    return [p["spec"].get("schedulingGroup") for p in pods]


def test_the_worker_job_gets_one_native_gang_of_the_workers_and_every_pod_binds(jobs: Jobs) -> None:
    with gang_nodes(jobs.cluster, jobs.ns) as nodes:
        node = nodes.add(cpu="4")  # 3 workers and the launcher, 1 CPU each
        jobs.create(indexed_job("fit", jobs.ns, 3))
        _, group = the_gang(jobs, "fit", 3)
        workers, launcher = running_pods(jobs, "fit", 3)
    assert gang_members(workers) == [{"podGroupName": group["metadata"]["name"]}] * 3
    assert launcher["spec"].get("schedulingGroup") is None, "the launcher is outside the gang"
    assert {p["metadata"]["name"]: p["spec"]["nodeName"] for p in [*workers, launcher]} == {
        **{p["metadata"]["name"]: node for p in workers}, launcher["metadata"]["name"]: node}
    assert [ref["kind"] for p in workers for ref in p["metadata"]["ownerReferences"]] == ["Job"] * 3


def test_a_gang_larger_than_the_free_capacity_binds_none_of_its_workers_until_it_fits(jobs: Jobs) -> None:
    with gang_nodes(jobs.cluster, jobs.ns) as nodes:
        nodes.add(cpu="4")  # 5 workers of 1 CPU: 4 would fit alone, 3 beside the launcher; a gang binds none
        jobs.create(indexed_job("big", jobs.ns, 5))
        _, group = the_gang(jobs, "big", 5)

        def all_refused() -> list[JSON] | None:  # the scheduler tried every worker; none bound meanwhile
            pods = jobs.workers("big")
            assert bound(pods) == [], "workers of a gang that does not fit were bound"
            return pods if len(pods) == 5 and all(refused(p) is not None for p in pods) else None

        workers = until(all_refused, timeout=120, what="the 5 workers of big reported unschedulable")
        reasons = {(c["reason"], "Insufficient cpu" in c["message"] or "pod group is unschedulable" in c["message"])
                   for p in workers for c in p["status"]["conditions"] if c["type"] == "PodScheduled"}
        assert reasons == {("Unschedulable", True)}, [refused(p) for p in workers]
        assert any("Insufficient cpu" in (refused(p) or "") for p in workers), [refused(p) for p in workers]
        assert gang_members(workers) == [{"podGroupName": group["metadata"]["name"]}] * 5
        scheduled = until(lambda: next((c for c in (jobs.must("podgroups", group["metadata"]["name"], SCHEDULING)
                                                    .get("status") or {}).get("conditions") or []
                                        if c["type"] == "PodGroupScheduled"), None), timeout=30,
                          what="the PodGroup's PodGroupScheduled condition")
        assert {k: scheduled[k] for k in ("status", "reason")} == {"status": "False", "reason": "Unschedulable"}
        until(lambda: (launcher_pod(jobs, "big") or {}).get("spec", {}).get("nodeName"), timeout=60,
              what="the launcher bound (outside the gang)")
        assert bound(jobs.workers("big")) == []
        nodes.add(cpu="4")  # 7 CPUs free: the whole gang fits
        workers, launcher = running_pods(jobs, "big", 5)
    assert (len(bound(workers)), launcher["spec"].get("schedulingGroup")) == (5, None)


def test_a_job_created_suspended_gets_its_worker_job_and_its_gang_only_once_resumed(jobs: Jobs) -> None:
    """The worker Job is made only for a job that runs, never suspended: the Job controller gives no gang to a Job
    that was ever suspended."""
    with gang_nodes(jobs.cluster, jobs.ns) as nodes:
        nodes.add(cpu="4")
        jobs.create(indexed_job("pause", jobs.ns, 2, runPolicy={"cleanPodPolicy": "Running", "suspend": True}))
        jobs.wait_condition("pause", "Suspended")
        assert (jobs.object("jobs", "pause-worker", BATCH), listed(jobs, "workloads"), listed(jobs, "podgroups"),
                jobs.workers("pause")) == (None, [], [], [])
        jobs.patch("pause", {"spec": {"runPolicy": {"suspend": False}}})
        _, group = the_gang(jobs, "pause", 2)
        assert jobs.must("jobs", "pause-worker", BATCH)["spec"]["suspend"] is False
        workers, launcher = running_pods(jobs, "pause", 2)
    assert gang_members(workers) == [{"podGroupName": group["metadata"]["name"]}] * 2
    assert (len(bound(workers)), launcher["spec"].get("schedulingGroup")) == (2, None)
