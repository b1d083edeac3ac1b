"""Gang scheduling with a real API server: the reconciler manages the job's PodGroup (e2e 12 and 13), and two
real gang schedulers place its pods all or none.

scheduler-plugins runs for real (hack/devcluster/coscheduling.py): its own PodGroup CRD, its scheduler as
``scheduler-plugins-scheduler`` beside the default one, and its PodGroup controller. kube-scheduler's own
gangs (``--gang-scheduling=kube-scheduler``: Workload and PodGroup of scheduling.k8s.io/v1alpha2) run with
the GenericWorkload and GangScheduling gates the harness turns on. The jobs of the placement tests run on
kwok nodes of their own (tests/integration/gangs.py), sized so that a job cannot fully fit. Volcano does not
run: its PodGroup CRD is a stand-in (crds/podgroups.yaml says why).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from urllib.parse import quote

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.audit import WRITE_VERBS, audit_events, resource_of
from hack.devcluster.coscheduling import (
    SCHEDULER_NAME,
    Coscheduling,
    SchedulerPluginsUnavailableError,
    find_scheduler_plugins,
)
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.wait import wait_for
from tests.integration.gangs import JOB_LABEL, JSON, bound, gang_nodes, pool_job, refused
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl

VOLCANO_CRD = Path(__file__).resolve().parent / "crds" / "podgroups.yaml"
GROUPS = {"volcano": "scheduling.volcano.sh/v1beta1", SCHEDULER_NAME: "scheduling.x-k8s.io/v1alpha1"}
PLUGINS_GROUP = GROUPS[SCHEDULER_NAME]
NATIVE = "kube-scheduler"  # --gang-scheduling: kube-scheduler's own gangs (Workload and PodGroup)
NATIVE_GROUP = "scheduling.k8s.io/v1alpha2"
QUIET_SECONDS = 30.0


@pytest.fixture(scope="module")
def coscheduling(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory,
                 pytestconfig: pytest.Config) -> Iterator[Coscheduling]:
    """The Coscheduling scheduler and the PodGroup controller, with the real PodGroup CRD, for this module."""
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    try:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            build = find_scheduler_plugins()
    except SchedulerPluginsUnavailableError as err:
        pytest.skip(str(err))
    process = Coscheduling(cluster, tmp_path_factory.mktemp("coscheduling"), build)
    process.install_crds()
    process.start()
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.fixture(params=list(GROUPS), ids=["volcano", "scheduler-plugins"])
def gang(request: pytest.FixtureRequest, cluster: LocalCluster, reconciler: ReconcilerControl,
         coscheduling: Coscheduling) -> Iterator[str]:
    name: str = request.param
    if name == "volcano":
        cluster.kubectl("apply", "-f", str(VOLCANO_CRD), check=True)
        cluster.kubectl("wait", "--for=condition=Established", "-f", str(VOLCANO_CRD), "--timeout=60s", check=True)
    reconciler.restart(f"--gang-scheduling={name}")
    try:
        yield name
    finally:
        reconciler.restart()


@pytest.fixture(params=[SCHEDULER_NAME, NATIVE], ids=["coscheduling", "native"])
def backend(request: pytest.FixtureRequest, reconciler: ReconcilerControl) -> Iterator[str]:
    """The reconciler with ``--gang-scheduling`` for a gang scheduler that runs here: scheduler-plugins'
    Coscheduling (started for the module), or kube-scheduler's own gangs (the harness turns the gates on)."""
    name: str = request.param
    coscheduling = request.getfixturevalue("coscheduling") if name == SCHEDULER_NAME else None
    reconciler.restart(f"--gang-scheduling={name}")
    try:
        yield name
    finally:
        if coscheduling is not None:
            coscheduling.check_running()
        reconciler.restart()


def test_pod_group_is_managed(cluster: LocalCluster, namespace: str, gang: str) -> None:
    jobs = Jobs(cluster, namespace)
    policy = {"cleanPodPolicy": "Running", "schedulingPolicy": {
        "minResources": {"cpu": "100000", "memory": "100000Gi"}, "scheduleTimeoutSeconds": 900}}
    jobs.create(mpijob("pi", 2, runPolicy=policy))
    group = until(lambda: jobs.object("podgroups", "pi", GROUPS[gang]), timeout=30, what="the PodGroup")
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["minResources"] == {"cpu": "100k", "memory": "100000Gi"}
    assert group["metadata"]["ownerReferences"][0]["kind"] == "MPIJob"
    workers = jobs.wait_workers("pi", 2)
    assert {p["spec"]["schedulerName"] for p in workers} == {gang}
    assert {p["status"].get("phase") for p in workers} == {"Pending"}
    jobs.patch("pi", {"spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}})
    wait_for(lambda: jobs.must("podgroups", "pi", GROUPS[gang])["spec"]["minMember"] == 2, timeout=30,
             what="the PodGroup following minAvailable")
    jobs.patch("pi", {"spec": {"runPolicy": {"suspend": True}}})
    jobs.wait_gone("podgroups", "pi", GROUPS[gang])
    jobs.wait_workers("pi", 0)


# ---- placement by the real Coscheduling scheduler
def pod_group_spec(jobs: Jobs, job: str, backend: str) -> JSON:
    """The spec of the job's PodGroup, once it exists."""
    version = NATIVE_GROUP if backend == NATIVE else PLUGINS_GROUP
    group = until(lambda: jobs.object("podgroups", job, version), timeout=30, what=f"the PodGroup of {job}")
    spec: JSON = group["spec"]
    return spec


def expected_spec(backend: str, job: str, pods: int) -> JSON:
    """The PodGroup spec, as stored, of a gang of ``pods`` pods of 1 CPU each."""
    if backend == NATIVE:
        return {"podGroupTemplateRef": {"workload": {"workloadName": job, "podGroupTemplateName": "mpijob"}},
                "schedulingPolicy": {"gang": {"minCount": pods}}, "disruptionMode": "Pod"}
    return {"minMember": pods, "minResources": {"cpu": str(pods)}, "scheduleTimeoutSeconds": 0}


def scheduler_of(backend: str) -> str:
    """The scheduler name the job's pods carry."""
    return "default-scheduler" if backend == NATIVE else backend


def wait_refused_unbound(jobs: Jobs, job: str, count: int, timeout: float = 90) -> list[JSON]:
    """Until the job has ``count`` pods and the scheduler reported each unschedulable; no pod of the job
    may be bound at any time meanwhile. Returns the pods."""
    def all_refused() -> list[JSON] | None:
        pods = jobs.pods(f"training.kubeflow.org/job-name={job}")
        assert bound(pods) == [], f"pods of {job} bound while the gang does not fit"
        return pods if len(pods) == count and all(refused(p) is not None for p in pods) else None

    return until(all_refused, timeout=timeout, what=f"the {count} pods of {job} refused by the scheduler")


def wait_succeeded_recording_bound(jobs: Jobs, job: str, timeout: float = 120) -> set[str]:
    """Until the job Succeeded; returns every pod seen bound on the way."""
    seen: set[str] = set()

    def succeeded() -> bool:
        seen.update(bound(jobs.pods(f"training.kubeflow.org/job-name={job}")))
        cond = jobs.condition(job, "Succeeded")
        return cond is not None and cond["status"] == "True"

    wait_for(succeeded, timeout=timeout, what=f"{job} Succeeded")
    return seen


def pod_names(job: str, seen: set[str]) -> tuple[list[str], int]:
    """The worker names seen, and how many launcher pods (``<job>-launcher-<suffix>``) were seen."""
    return sorted(n for n in seen if n.startswith(f"{job}-worker-")), sum(
        n.startswith(f"{job}-launcher-") for n in seen)


def test_a_job_larger_than_free_capacity_binds_no_pod_until_it_fits(
        cluster: LocalCluster, namespace: str, backend: str) -> None:
    jobs = Jobs(cluster, namespace)
    with gang_nodes(cluster, namespace) as nodes:
        nodes.add(cpu="4")  # 5 pods of 1 CPU: 4 would fit, so a scheduler without gangs binds 4
        jobs.create(pool_job("big", namespace, 4, run_for="2s"))
        assert pod_group_spec(jobs, "big", backend) == expected_spec(backend, "big", 5)
        pods = wait_refused_unbound(jobs, "big", 5)
        assert {p["spec"]["schedulerName"] for p in pods} == {scheduler_of(backend)}
        nodes.add(cpu="4")
        seen = wait_succeeded_recording_bound(jobs, "big")
    assert pod_names("big", seen) == ([f"big-worker-{i}" for i in range(4)], 1)


def placements(jobs: Jobs, names: tuple[str, str]) -> tuple[int, int]:
    """How many pods of each job hold a place: bound, not finished and not being deleted, from one LIST of both jobs'
    pods (one consistent snapshot: two reads, one per job, could see the first job before its workers went and the
    second after its gang began to bind). A job that has Succeeded holds none (what is left of it is being torn down,
    which takes a moment, more under load, while the other job's gang may bind, which is what a gang should do)."""
    done = {name for name in names if (jobs.condition(name, "Succeeded") or {}).get("status") == "True"}
    pods = jobs.pods(quote(f"{JOB_LABEL} in ({','.join(names)})", safe="=,()/"))
    live = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not p["metadata"].get("deletionTimestamp")]

    def placed(name: str) -> int:
        mine = [p for p in live if p["metadata"]["labels"].get(JOB_LABEL) == name]
        return 0 if name in done else len(bound(mine))

    first, second = (placed(name) for name in names)
    return first, second


def test_two_jobs_that_fit_only_alone_are_never_both_partially_placed(
        cluster: LocalCluster, namespace: str, backend: str) -> None:
    jobs = Jobs(cluster, namespace)
    names = ("one", "two")
    observed: set[tuple[int, int]] = set()
    with gang_nodes(cluster, namespace) as nodes:
        nodes.add(cpu="4")  # each job: 2 workers and a launcher of 1 CPU, 3 of 4 CPUs
        for name in names:
            jobs.create(pool_job(name, namespace, 2, run_for="3s"))

        def both_succeeded() -> bool:
            observed.add(placements(jobs, names))
            return all((jobs.condition(n, "Succeeded") or {}).get("status") == "True" for n in names)

        wait_for(both_succeeded, timeout=240, interval=0.1, what="both jobs Succeeded")
    partial = {(a, b) for a, b in observed if 0 < a < 3 and 0 < b < 3}
    assert partial == set(), f"both jobs partially placed at once: {sorted(observed)}"
    assert {(3, 0), (0, 3)} & observed, f"never one job whole and the other not at all: {sorted(observed)}"


def test_wait_for_workers_ready_runs_under_a_gang(cluster: LocalCluster, namespace: str, backend: str) -> None:
    """kubeflow/mpi-operator#608: the gang is the workers; with upstream's workers + 1 it never starts."""
    jobs = Jobs(cluster, namespace)
    with gang_nodes(cluster, namespace) as nodes:
        nodes.add(cpu="4")
        upstream_count = {"cleanPodPolicy": "Running", "schedulingPolicy": {"minAvailable": 3}}
        jobs.create(pool_job("upstream", namespace, 2, launcherCreationPolicy="WaitForWorkersReady",
                             runPolicy=upstream_count))
        jobs.wait_workers("upstream", 2)
        jobs.create(pool_job("ours", namespace, 2, launcherCreationPolicy="WaitForWorkersReady"))
        assert pod_group_spec(jobs, "ours", backend) == expected_spec(backend, "ours", 2)
        seen = wait_succeeded_recording_bound(jobs, "ours")  # created later, on the same node: it had room
        assert pod_names("ours", seen) == (["ours-worker-0", "ours-worker-1"], 1)
        pods = jobs.workers("upstream")
    assert [(p["metadata"]["name"], p["spec"].get("nodeName")) for p in pods] == [
        ("upstream-worker-0", None), ("upstream-worker-1", None)]
    assert jobs.launcher("upstream") is None
    if backend == SCHEDULER_NAME:
        assert {p["metadata"]["name"]: "cannot find enough sibling pods, current pods number: 2, minMember of "
                "group: 3" in (refused(p) or "") for p in pods} == {"upstream-worker-0": True,
                                                                     "upstream-worker-1": True}


def pod_group_writes(log: Path, username: str, namespace: str, offset: int) -> list[str]:
    """The PodGroup and Workload writes (not status) ``username`` made in ``namespace`` since byte ``offset``
    of the audit log, with their answers' codes."""
    return [f"{e['verb']} {resource_of(e)} {e['objectRef'].get('name')}: {e.get('responseStatus', {}).get('code')}"
            for e in audit_events(log, offset=offset)
            if (e.get("user") or {}).get("username") == username and e["objectRef"].get("namespace") == namespace
            and resource_of(e) in ("podgroups", "workloads") and e["verb"] in WRITE_VERBS]


def test_a_steady_job_makes_no_pod_group_write(cluster: LocalCluster, namespace: str, backend: str,
                                               reconciler: ReconcilerControl) -> None:
    jobs = Jobs(cluster, namespace)
    log = cluster.audit_log
    assert log is not None
    username = reconciler.credentials.username
    with gang_nodes(cluster, namespace) as nodes:
        nodes.add(cpu="4")
        jobs.create(pool_job("steady", namespace, 2, launcher_labels={"test.mpijob/outcome": "hang"}))
        jobs.wait_condition("steady", "Running", timeout=90)
        offset = log.stat().st_size
        jobs.patch("steady", {"metadata": {"labels": {"touched": "yes"}}})  # one more sync, on top of the
        end = time.monotonic() + QUIET_SECONDS  # PodGroup controller's status writes, which enqueue the job

        def quiet_until_the_end() -> bool:
            assert pod_group_writes(log, username, namespace, offset) == []
            return time.monotonic() >= end

        wait_for(quiet_until_the_end, timeout=QUIET_SECONDS + 10, interval=1.0,
                 what=f"{QUIET_SECONDS:.0f} s without a PodGroup write")
        assert jobs.condition("steady", "Running") is not None


def test_native_gang_follows_suspend_and_resume(cluster: LocalCluster, namespace: str,
                                                reconciler: ReconcilerControl) -> None:
    """Suspension deletes the Workload and the PodGroup (the PodGroup once no pod names it: its finalizer);
    resuming makes both anew, and the job runs to Succeeded under the new gang."""
    reconciler.restart(f"--gang-scheduling={NATIVE}")
    try:
        jobs = Jobs(cluster, namespace)
        with gang_nodes(cluster, namespace) as nodes:
            nodes.add(cpu="4")
            jobs.create(pool_job("pause", namespace, 2, runPolicy={"cleanPodPolicy": "Running", "suspend": True}))
            jobs.wait_condition("pause", "Suspended")
            assert [jobs.object(p, "pause", NATIVE_GROUP) for p in ("workloads", "podgroups")] == [None, None]
            jobs.patch("pause", {"spec": {"runPolicy": {"suspend": False}}})
            first = {p: until(partial(jobs.object, p, "pause", NATIVE_GROUP), timeout=30, what=p)["metadata"]["uid"]
                     for p in ("workloads", "podgroups")}
            jobs.wait_workers("pause", 2, phase="Running")
            jobs.patch("pause", {"spec": {"runPolicy": {"suspend": True}}})
            jobs.wait_workers("pause", 0)
            for plural in ("podgroups", "workloads"):
                jobs.wait_gone(plural, "pause", NATIVE_GROUP)
            jobs.patch("pause", {"spec": {"runPolicy": {"suspend": False}}})
            again = {p: until(partial(jobs.object, p, "pause", NATIVE_GROUP), timeout=30, what=p)["metadata"]["uid"]
                     for p in ("workloads", "podgroups")}
            assert {p: again[p] != first[p] for p in first} == {"workloads": True, "podgroups": True}
            seen = wait_succeeded_recording_bound(jobs, "pause")
        assert pod_names("pause", seen) == (["pause-worker-0", "pause-worker-1"], 1)
    finally:
        reconciler.restart()


def test_a_resume_with_a_new_size_waits_for_the_old_native_pod_group_to_go(
        cluster: LocalCluster, namespace: str, reconciler: ReconcilerControl) -> None:
    """Suspended, then resumed with 3 workers instead of 2 before its PodGroup was gone (a pod still names it,
    so its finalizer keeps it): no worker is made while it terminates, then every pod runs under a PodGroup
    made anew with the new size. Workers naming the terminating PodGroup would keep it, with the old size."""
    reconciler.restart(f"--gang-scheduling={NATIVE}")
    try:
        jobs = Jobs(cluster, namespace)
        with gang_nodes(cluster, namespace) as nodes:
            nodes.add(cpu="4")
            jobs.create(pool_job("grow", namespace, 2, launcher_labels={"test.mpijob/outcome": "hang"}))
            jobs.wait_workers("grow", 2, phase="Running", timeout=90)
            first = jobs.must("podgroups", "grow", NATIVE_GROUP)
            holder = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "holder"}, "spec": {
                "schedulingGroup": {"podGroupName": "grow"}, "nodeSelector": {"nowhere": "true"},
                "containers": [{"name": "c", "image": "busybox"}]}}
            cluster.rest.create(jobs.path("pods"), holder)
            jobs.patch("grow", {"spec": {"runPolicy": {"suspend": True}}})
            jobs.wait_workers("grow", 0)
            until(lambda: (jobs.must("podgroups", "grow", NATIVE_GROUP)["metadata"].get("deletionTimestamp")),
                  timeout=30, what="the PodGroup terminating")
            jobs.patch("grow", {"spec": {"runPolicy": {"suspend": False},
                                         "mpiReplicaSpecs": {"Worker": {"replicas": 3}}}})
            jobs.wait_condition("grow", "Suspended", status="False", timeout=30)  # the resume's sync wrote
            still = jobs.must("podgroups", "grow", NATIVE_GROUP)
            assert (still["metadata"]["uid"], bool(still["metadata"].get("deletionTimestamp"))) == (
                first["metadata"]["uid"], True)
            assert jobs.pods("training.kubeflow.org/job-role=worker") == [], "no worker names it"
            cluster.rest.request("DELETE", jobs.path("pods", "holder"), {"gracePeriodSeconds": 0})
            workers = jobs.wait_workers("grow", 3, phase="Running", timeout=90)
            group = jobs.must("podgroups", "grow", NATIVE_GROUP)
            assert (group["metadata"]["uid"] != first["metadata"]["uid"], group["spec"]["schedulingPolicy"],
                    group["metadata"].get("deletionTimestamp")) == (True, {"gang": {"minCount": 4}}, None)
            assert [p["spec"]["schedulingGroup"] for p in workers] == [{"podGroupName": "grow"}] * 3
            jobs.wait_launcher("grow", suspended=False, timeout=30)
    finally:
        reconciler.restart()
