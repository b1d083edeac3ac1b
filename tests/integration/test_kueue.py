"""MPIJobs queued and admitted by a real Kueue (hack/devcluster/kueue.py, built from sigs.k8s.io/kueue by
hack/build/build-kueue.sh) and run by our reconciler and webhook (docs/kueue.md).

Kueue suspends queued MPIJobs at admission, admits them against ClusterQueue quota, writes its
ResourceFlavor's nodeSelector and tolerations into the replica templates and unsuspends them; it
preempts lower-priority jobs by suspending them again; it reads our status to finish its Workloads.
Flavor nodes are kwok nodes labelled and tainted for the flavor, so that only admitted jobs land there.
Launchers labelled ``test.mpijob/outcome=hang`` run until the test relabels their pod (hack/devcluster/kwok-stages).
Skipped only when Go is absent and Kueue is not built.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.devcluster import LocalCluster
from hack.devcluster.audit import audit_events
from hack.devcluster.kueue import NAMESPACE as KUEUE_NAMESPACE
from hack.devcluster.kueue import SERVICE_ACCOUNT as KUEUE_SERVICE_ACCOUNT
from hack.devcluster.kueue import VERSION, Kueue, KueueUnavailableError, find_kueue
from hack.devcluster.nodes import NodePool, build_node, unready_nodes
from hack.devcluster.operators import OperatorWebhook
from hack.devcluster.rest import ApiError
from hack.devcluster.wait import wait_for
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl

JSON = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
POOL_LABEL = "kueue-test/pool"
POOL = "kueue"
FLAVOR_TOLERATION = {"key": POOL_LABEL, "operator": "Equal", "value": POOL, "effect": "NoSchedule"}
HANG_LABEL = "test.mpijob/outcome"
HANG = {HANG_LABEL: "hang"}
PODSET_LABEL = "kueue.x-k8s.io/podset"
DEFAULT_TOLERATIONS: list[JSON] = [  # added to every pod by the API server's DefaultTolerationSeconds admission plugin
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
JOB_CPU = 3  # one launcher and two workers, one CPU each
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
MUTATION_ANNOTATION = "mutation.webhook.admission.k8s.io/"
OUR_DEFAULTER = "mpijob-defaulter.kubeflow.org"  # deploy/webhook/mutating-webhook-configuration.yaml
KUEUE_MPIJOB_MUTATOR = "mmpijob.kb.io"


# ---- fixtures
@pytest.fixture(scope="module")
def kueue(cluster: LocalCluster, reconciler: ReconcilerControl, webhook: OperatorWebhook,
          tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[Kueue]:
    """Kueue running against the session cluster, its webhooks registered, for this module only."""
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    try:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            build = find_kueue()
    except KueueUnavailableError as err:
        pytest.skip(str(err))
    began = time.monotonic()
    process = Kueue(cluster, tmp_path_factory.mktemp("kueue"), build)
    process.install_crds()
    process.install_rbac()
    process.start()
    try:
        process.wait_ready()
        process.register()
        print(f"[harness] Kueue {VERSION} ready in {time.monotonic() - began:.1f}s", file=sys.stderr, flush=True)
        yield process
    finally:
        process.stop()
        keep = cluster.keep_logs
        if keep is not None:
            with contextlib.suppress(OSError):
                keep.mkdir(parents=True, exist_ok=True)
                (keep / "kueue.log").write_bytes(process.log.read_bytes())


@pytest.fixture(scope="module")
def flavor_nodes(cluster: LocalCluster) -> Iterator[list[str]]:
    """Two kwok nodes with the flavor's label and a matching NoSchedule taint, deleted afterwards."""
    pool = NodePool(count=2, cpu="32", name_prefix="kueue-node-")
    names = pool.names()
    for i in range(pool.count):
        node = build_node(pool, i)
        node["metadata"]["labels"][POOL_LABEL] = POOL
        node["spec"]["taints"] = [{k: v for k, v in FLAVOR_TOLERATION.items() if k != "operator"}]
        cluster.rest.create("/api/v1/nodes", node)
    try:
        wait_for(lambda: not unready_nodes(cluster.rest, names), timeout=60, what=f"nodes {names} Ready")
        yield names
    finally:
        for name in names:
            with contextlib.suppress(ApiError):
                cluster.rest.request("DELETE", f"/api/v1/nodes/{name}")


@pytest.fixture
def jobs(cluster: LocalCluster, namespace: str, kueue: Kueue, flavor_nodes: list[str]) -> Iterator[Jobs]:
    """The test's namespace; afterwards its MPIJobs are deleted and their Workloads waited for while Kueue
    still runs (it holds finalizers on them), so that the namespace can go once Kueue has stopped."""
    yield Jobs(cluster, namespace)
    base = f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs"
    cluster.rest.request("DELETE", base, {"propagationPolicy": "Background"})
    workloads = f"/apis/{KUEUE}/namespaces/{namespace}/workloads"
    # deleted here too: the garbage collector learns of Kueue's new CRDs only at its next discovery resync
    cluster.rest.request("DELETE", workloads, {"propagationPolicy": "Background"})
    wait_for(lambda: not cluster.rest.get(workloads)["items"], timeout=60, what=f"the Workloads of {namespace} gone")


class Queues:
    """Kueue objects of one test: cluster-scoped ones named after its namespace, deleted afterwards."""

    def __init__(self, cluster: LocalCluster, namespace: str) -> None:
        self.cluster, self.ns = cluster, namespace
        self.created: list[str] = []

    def create(self, plural: str, obj: JSON, namespaced: bool = False) -> JSON:
        path = f"/apis/{KUEUE}/" + (f"namespaces/{self.ns}/" if namespaced else "") + plural
        created = self.cluster.rest.create(path, {"apiVersion": KUEUE, **obj})
        if not namespaced:
            self.created.append(f"{path}/{obj['metadata']['name']}")
        return created

    def get(self, plural: str, name: str, namespaced: bool = False) -> JSON:
        return self.cluster.rest.get(f"/apis/{KUEUE}/" + (f"namespaces/{self.ns}/" if namespaced else "")
                                     + f"{plural}/{name}")

    def queue(self, cpu: int, *, flavor: bool = True, preemption: JSON | None = None,
              admission_check: str | None = None) -> str:
        """A ResourceFlavor (for the flavor nodes), a ClusterQueue with ``cpu`` CPUs of it and a LocalQueue
        named after the namespace; returns the LocalQueue's name."""
        name = self.ns
        flavor_spec: JSON = {"nodeLabels": {POOL_LABEL: POOL}, "tolerations": [FLAVOR_TOLERATION]} if flavor else {}
        self.create("resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": flavor_spec})
        spec: JSON = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.ns}},
                      "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                          {"name": name, "resources": [{"name": "cpu", "nominalQuota": str(cpu)}]}]}]}
        if preemption:
            spec["preemption"] = preemption
        if admission_check:
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": admission_check}]}
        self.create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
        self.create("localqueues", {"kind": "LocalQueue", "metadata": {"name": name},
                                    "spec": {"clusterQueue": name}}, namespaced=True)
        if admission_check is None:
            until(lambda: _condition(self.get("clusterqueues", name), "Active") == "True", timeout=30,
                  what=f"ClusterQueue {name} Active")
        return name

    def workload(self, job: JSON) -> JSON | None:
        """The Workload Kueue made for the MPIJob ``job`` (controlled by it)."""
        uid = job["metadata"]["uid"]
        for item in self.cluster.rest.get(f"/apis/{KUEUE}/namespaces/{self.ns}/workloads")["items"]:
            if any(ref.get("uid") == uid and ref.get("controller") for ref in item["metadata"].get(
                    "ownerReferences") or []):
                return dict(item)
        return None

    def cleanup(self) -> None:
        for path in reversed(self.created):
            with contextlib.suppress(ApiError):
                self.cluster.rest.request("DELETE", path)


@pytest.fixture
def queues(cluster: LocalCluster, namespace: str, kueue: Kueue) -> Iterator[Queues]:
    q = Queues(cluster, namespace)
    try:
        yield q
    finally:
        q.cleanup()


# ---- helpers
def _condition(obj: JSON, kind: str) -> str | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return str(cond["status"])
    return None


def _conditions(obj: JSON) -> dict[str, tuple[str, str]]:
    """type -> (status, reason) of every condition."""
    return {c["type"]: (c["status"], c.get("reason", "")) for c in (obj.get("status") or {}).get("conditions") or []}


def container(name: str = "main") -> JSON:
    return {"name": name, "image": "mpi-image", "resources": {"requests": {"cpu": "1"}}}


def queued_job(name: str, queue: str, *, hang: bool = True, priority: str | None = None) -> JSON:
    """An MPIJob of one launcher and two workers (one CPU each), labelled for the LocalQueue ``queue``."""
    labels = {QUEUE_LABEL: queue, **({PRIORITY_LABEL: priority} if priority else {})}
    launcher: JSON = {"template": {"spec": {"containers": [container()]}}}
    if hang:
        launcher["template"]["metadata"] = {"labels": dict(HANG)}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name, "labels": labels},
            "spec": {"slotsPerWorker": 1, "runPolicy": {"cleanPodPolicy": "Running"},
                     "mpiReplicaSpecs": {"Launcher": launcher, "Worker": {
                         "replicas": 2, "template": {"spec": {"containers": [container()]}}}}}}


def defaulted_spec(run_policy: JSON, *, kueue_mutated: bool = True) -> JSON:
    """The stored spec of ``queued_job`` after both webhooks: our defaults, ``run_policy`` as given and, when
    Kueue's webhook changed the job, the empty ``metadata`` it adds to the Worker template (its patch is
    computed from the job re-serialised from Go types, where a PodTemplateSpec's ObjectMeta is never
    omitted)."""
    worker: JSON = {"spec": {"containers": [container()]}}
    if kueue_mutated:
        worker = {"metadata": {}, **worker}
    return {
        "slotsPerWorker": 1, "sshAuthMountPath": "/root/.ssh", "mpiImplementation": "OpenMPI",
        "launcherCreationPolicy": "AtStartup", "runLauncherAsWorker": False, "runPolicy": run_policy,
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "restartPolicy": "OnFailure", "template": {
                "metadata": {"labels": HANG}, "spec": {"containers": [container()]}}},
            "Worker": {"replicas": 2, "restartPolicy": "Never", "template": worker}}}


def launcher_pods(jobs: Jobs, job: str) -> list[JSON]:
    pods = jobs.pods(f"training.kubeflow.org/job-name={job},training.kubeflow.org/job-role=launcher")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def running_launcher(jobs: Jobs, job: str) -> JSON:
    def running() -> JSON | None:
        pods = [p for p in launcher_pods(jobs, job) if p.get("status", {}).get("phase") == "Running"]
        return pods[0] if len(pods) == 1 else None

    return until(running, timeout=60, what=f"the running launcher pod of {job}")


def finish_launcher(jobs: Jobs, job: str) -> None:
    """Let the running launcher pod of ``job`` succeed (kwok's test-pod-succeed stage, 500 ms later)."""
    pod = running_launcher(jobs, job)
    jobs.cluster.rest.merge_patch(jobs.path("pods", pod["metadata"]["name"]),
                                  {"metadata": {"labels": {"test.mpijob/outcome": "succeed"}}})


def admitted_placement(jobs: Jobs, queues: Queues, job: str, flavor_nodes: list[str]) -> None:
    """What Kueue's admission wrote into both replica templates (the flavor's nodeSelector and toleration,
    its queue and podset labels, the Workload annotation; nothing else changed from ``queued_job``)
    reached the launcher Job's pod template and every pod, and the pods run on the flavor's nodes."""
    stored = jobs.get(job)
    workload = queues.workload(stored)
    assert workload is not None
    marks = {"labels": {"kueue.x-k8s.io/cluster-queue-name": workload["status"]["admission"]["clusterQueue"],
                        "kueue.x-k8s.io/local-queue-name": stored["metadata"]["labels"][QUEUE_LABEL]},
             "annotations": {"kueue.x-k8s.io/workload": workload["metadata"]["name"]}}
    submitted = queued_job(job, "", hang=HANG_LABEL in (
        stored["spec"]["mpiReplicaSpecs"]["Launcher"]["template"].get("metadata") or {}).get("labels", {}))
    for replica, podset in (("Launcher", "launcher"), ("Worker", "worker")):
        original = submitted["spec"]["mpiReplicaSpecs"][replica]["template"]
        labels = {**(original.get("metadata") or {}).get("labels", {}), **marks["labels"], PODSET_LABEL: podset}
        assert stored["spec"]["mpiReplicaSpecs"][replica]["template"] == {
            "metadata": {"labels": labels, "annotations": marks["annotations"]},
            "spec": {**original["spec"], "nodeSelector": {POOL_LABEL: POOL}, "tolerations": [FLAVOR_TOLERATION]}}
    launcher = jobs.wait_launcher(job, suspended=False)
    placed: list[tuple[str, JSON, list[JSON], str]] = [
        ("launcher Job", launcher["spec"]["template"], [FLAVOR_TOLERATION], "launcher")]
    for pod in [*jobs.wait_workers(job, 2, "Running"), running_launcher(jobs, job)]:
        assert pod["spec"]["nodeName"] in flavor_nodes, pod["metadata"]["name"]
        role = pod["metadata"]["labels"]["training.kubeflow.org/job-role"]
        placed.append((pod["metadata"]["name"], pod, [FLAVOR_TOLERATION, *DEFAULT_TOLERATIONS], role))
    for where, obj, tolerations, podset in placed:
        assert obj["spec"]["nodeSelector"] == {POOL_LABEL: POOL}, where
        assert obj["spec"]["tolerations"] == tolerations, where
        assert obj["metadata"]["labels"].items() >= {**marks["labels"], PODSET_LABEL: podset}.items(), where
        assert obj["metadata"]["annotations"] == marks["annotations"], where


def assert_suspended_without_pods(jobs: Jobs, job: str) -> None:
    """Suspended as upstream suspends: no pods, a suspended launcher Job, Service, ConfigMap and Secret kept."""
    stored = jobs.get(job)
    assert stored["spec"]["runPolicy"]["suspend"] is True
    suspended = jobs.wait_condition(job, "Suspended")
    assert (suspended["status"], suspended["reason"]) == ("True", "MPIJobSuspended")
    assert jobs.workers(job) == []
    assert launcher_pods(jobs, job) == []
    jobs.wait_launcher(job, suspended=True)  # created suspended (launcherCreationPolicy AtStartup), or suspended
    for plural, name in (("services", job), ("configmaps", f"{job}-config"), ("secrets", f"{job}-ssh")):
        jobs.must(plural, name)


def wait_workload(queues: Queues, jobs: Jobs, job: str, kind: str, status: str = "True", timeout: float = 60) -> JSON:
    """The job's Workload, once its condition ``kind`` has ``status``."""
    stored = jobs.get(job)

    def found() -> JSON | None:
        workload = queues.workload(stored)
        return workload if workload is not None and _condition(workload, kind) == status else None

    return until(found, timeout=timeout, what=f"the Workload of {job} {kind}={status}")


def wait_finished_workload(queues: Queues, jobs: Jobs, job: str) -> JSON:
    """The job's Workload once Kueue has marked it Finished, checked against our Succeeded condition."""
    workload = wait_workload(queues, jobs, job, "Finished")
    finished = next(c for c in workload["status"]["conditions"] if c["type"] == "Finished")
    succeeded = jobs.condition(job, "Succeeded")
    assert succeeded is not None
    assert (finished["reason"], finished["message"]) == ("Succeeded", succeeded["message"])
    return dict(workload)


# ---- 1. quota, flavors, queueing
def test_quota_admits_two_jobs_and_queues_the_third(jobs: Jobs, queues: Queues, flavor_nodes: list[str]) -> None:
    queue = queues.queue(cpu=2 * JOB_CPU)
    for name in ("first", "second"):
        created = jobs.create(queued_job(name, queue))
        assert created["spec"]["runPolicy"]["suspend"] is True  # Kueue's mutating webhook
        jobs.wait_condition(name, "Running", timeout=90)
    jobs.create(queued_job("third", queue))
    third_workload = wait_workload(queues, jobs, "third", "QuotaReserved", "False")
    assert _conditions(third_workload)["QuotaReserved"] == ("False", "Pending")
    for name in ("first", "second"):
        admitted_placement(jobs, queues, name, flavor_nodes)
        workload = wait_workload(queues, jobs, name, "PodsReady")  # from our Running condition
        assert _conditions(workload)["PodsReady"] == ("True", "Started")
        assert workload["status"]["admission"] == {"clusterQueue": queue, "podSetAssignments": [
            {"name": "launcher", "flavors": {"cpu": queue}, "resourceUsage": {"cpu": "1"}, "count": 1},
            {"name": "worker", "flavors": {"cpu": queue}, "resourceUsage": {"cpu": "2"}, "count": 2}]}
    assert_suspended_without_pods(jobs, "third")
    assert jobs.get("third")["spec"] == defaulted_spec({"cleanPodPolicy": "Running", "suspend": True})

    finish_launcher(jobs, "first")
    jobs.wait_condition("first", "Succeeded", timeout=60)
    wait_finished_workload(queues, jobs, "first")
    jobs.wait_condition("third", "Running", timeout=90)  # admitted in the freed quota
    admitted_placement(jobs, queues, "third", flavor_nodes)
    for name in ("third", "second"):
        finish_launcher(jobs, name)
        jobs.wait_condition(name, "Succeeded", timeout=60)
        wait_finished_workload(queues, jobs, name)


# ---- 2. preemption
def test_high_priority_job_preempts_the_running_low_priority_one(jobs: Jobs, queues: Queues,
                                                                  flavor_nodes: list[str]) -> None:
    for name, value in (("low", 100), ("high", 1000)):
        queues.create("workloadpriorityclasses", {"kind": "WorkloadPriorityClass",
                                                  "metadata": {"name": f"{jobs.ns}-{name}"}, "value": value})
    queue = queues.queue(cpu=JOB_CPU, preemption={"withinClusterQueue": "LowerPriority"})
    jobs.create(queued_job("low", queue, priority=f"{jobs.ns}-low"))
    jobs.wait_condition("low", "Running", timeout=90)
    admitted_placement(jobs, queues, "low", flavor_nodes)
    first_pods = {p["metadata"]["uid"] for p in [*jobs.workers("low"), *launcher_pods(jobs, "low")]}

    jobs.create(queued_job("high", queue, priority=f"{jobs.ns}-high"))
    low_workload = wait_workload(queues, jobs, "low", "Evicted", timeout=60)
    assert _conditions(low_workload)["Evicted"] == ("True", "Preempted")
    assert _conditions(low_workload)["Preempted"] == ("True", "InClusterQueue")
    wait_for(lambda: not jobs.workers("low") and not launcher_pods(jobs, "low"), timeout=60,
             what="the low job's pods deleted")
    assert_suspended_without_pods(jobs, "low")
    # Kueue restored the templates as submitted (its flavor's nodeSelector and toleration removed)
    assert jobs.get("low")["spec"] == defaulted_spec({"cleanPodPolicy": "Running", "suspend": True})

    jobs.wait_condition("high", "Running", timeout=90)
    admitted_placement(jobs, queues, "high", flavor_nodes)
    finish_launcher(jobs, "high")
    jobs.wait_condition("high", "Succeeded", timeout=60)
    wait_finished_workload(queues, jobs, "high")

    jobs.wait_condition("low", "Suspended", status="False", timeout=90)  # admitted again
    jobs.wait_condition("low", "Running", timeout=90)
    admitted_placement(jobs, queues, "low", flavor_nodes)
    assert not first_pods & {p["metadata"]["uid"] for p in [*jobs.workers("low"), *launcher_pods(jobs, "low")]}
    finish_launcher(jobs, "low")
    jobs.wait_condition("low", "Succeeded", timeout=60)
    wait_finished_workload(queues, jobs, "low")


# ---- 2a. the IndexedJob worker backend under Kueue
BATCH = "batch/v1"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
RANK_LABEL = "training.kubeflow.org/replica-index"


def indexed(job: JSON) -> JSON:
    """``job`` with the IndexedJob backend; its workers labelled to hang: kwok completes every pod a Job owns
    within half a second otherwise (hack/devcluster/kwok-stages/test-pod-succeed.yaml)."""
    job["metadata"]["annotations"] = {"mpijobs.kubeflow.org/worker-backend": "IndexedJob"}
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"] = {"labels": dict(HANG)}
    return job


def indexed_workers_placed(jobs: Jobs, queues: Queues, job: str, flavor_nodes: list[str]) -> JSON:
    """The admitted job's worker Job carries Kueue's marks and the flavor's placement in its pod template, and its
    two pods run on the flavor's nodes with their rank label (the webhook's pod mutation); the worker Job."""
    stored = jobs.get(job)
    workload = queues.workload(stored)
    assert workload is not None
    worker_job = until(lambda: jobs.object("jobs", f"{job}-worker", BATCH), timeout=60, what=f"{job}'s worker Job")
    assert not worker_job["spec"].get("suspend")
    template = worker_job["spec"]["template"]
    assert template["spec"]["nodeSelector"] == {POOL_LABEL: POOL}
    assert template["spec"]["tolerations"] == [FLAVOR_TOLERATION]
    assert template["metadata"]["labels"].items() >= {
        PODSET_LABEL: "worker", "kueue.x-k8s.io/cluster-queue-name": workload["status"]["admission"]["clusterQueue"],
        "mpijobs.kubeflow.org/worker-job": job}.items()
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == workload["metadata"]["name"]
    pods = jobs.wait_workers(job, 2, "Running", timeout=90)
    assert sorted((p["metadata"]["labels"][COMPLETION_INDEX], p["metadata"]["labels"][RANK_LABEL],
                   p["spec"]["hostname"]) for p in pods) == [("0", "0", f"{job}-worker-0"),
                                                             ("1", "1", f"{job}-worker-1")]
    for pod in pods:
        assert pod["spec"]["nodeName"] in flavor_nodes, pod["metadata"]["name"]
        assert pod["metadata"]["ownerReferences"][0]["uid"] == worker_job["metadata"]["uid"]
    return worker_job


def test_indexed_job_workers_follow_admission_and_preemption(jobs: Jobs, queues: Queues,
                                                             flavor_nodes: list[str]) -> None:
    """Kueue sees only the MPIJob: a queued job has no worker Job; admission brings one, unsuspended, its pods placed
    on the flavor and ranked; preemption (Kueue suspends the MPIJob) deletes it with its pods, and the next admission
    makes a new one under the same name and hostnames."""
    for name, value in (("low", 100), ("high", 1000)):
        queues.create("workloadpriorityclasses", {"kind": "WorkloadPriorityClass",
                                                  "metadata": {"name": f"idx-{name}-{jobs.ns[-6:]}"}, "value": value})
    queue = queues.queue(cpu=JOB_CPU, preemption={"withinClusterQueue": "LowerPriority"})
    jobs.create(indexed(queued_job("low", queue, priority=f"idx-low-{jobs.ns[-6:]}")))
    jobs.wait_condition("low", "Running", timeout=90)
    first = indexed_workers_placed(jobs, queues, "low", flavor_nodes)

    jobs.create(indexed(queued_job("high", queue, priority=f"idx-high-{jobs.ns[-6:]}")))
    wait_workload(queues, jobs, "low", "Evicted", timeout=60)
    jobs.wait_gone("jobs", "low-worker", BATCH, timeout=60)
    wait_for(lambda: not jobs.workers("low") and not launcher_pods(jobs, "low"), timeout=60,
             what="the low job's pods deleted")
    jobs.wait_condition("high", "Running", timeout=90)
    indexed_workers_placed(jobs, queues, "high", flavor_nodes)
    assert jobs.object("jobs", "low-worker", BATCH) is None, "a preempted job makes no worker Job"
    finish_launcher(jobs, "high")
    jobs.wait_condition("high", "Succeeded", timeout=60)
    wait_finished_workload(queues, jobs, "high")

    jobs.wait_condition("low", "Running", timeout=90)  # admitted again
    second = indexed_workers_placed(jobs, queues, "low", flavor_nodes)
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    finish_launcher(jobs, "low")
    jobs.wait_condition("low", "Succeeded", timeout=60)
    wait_finished_workload(queues, jobs, "low")


# ---- 2b. native gangs follow admission
NATIVE_GANG = "scheduling.k8s.io/v1alpha2"


def native_gang(jobs: Jobs, job: str) -> list[str]:
    """The kinds of the job's native gang objects (Workload, PodGroup of scheduling.k8s.io) that exist."""
    return [kind for plural, kind in (("workloads", "Workload"), ("podgroups", "PodGroup"))
            if jobs.object(plural, job, NATIVE_GANG) is not None]


def test_native_gang_follows_admission(jobs: Jobs, queues: Queues, reconciler: ReconcilerControl) -> None:
    """With --gang-scheduling=kube-scheduler, a job Kueue holds (suspended) has no gang objects; admission
    brings them, the job runs, and its cleanup removes them, while the next job is admitted in its quota."""
    reconciler.restart("--gang-scheduling=kube-scheduler")
    try:
        queue = queues.queue(cpu=JOB_CPU)
        jobs.create(queued_job("first", queue))
        jobs.wait_condition("first", "Running", timeout=90)
        jobs.create(queued_job("second", queue))
        wait_workload(queues, jobs, "second", "QuotaReserved", "False")
        assert (native_gang(jobs, "first"), native_gang(jobs, "second")) == (["Workload", "PodGroup"], [])
        assert {p["spec"].get("schedulingGroup", {}).get("podGroupName") for p in jobs.workers("first")} == {"first"}
        finish_launcher(jobs, "first")
        jobs.wait_condition("first", "Succeeded", timeout=60)
        jobs.wait_condition("second", "Running", timeout=90)
        wait_for(lambda: native_gang(jobs, "first") == [], timeout=60, what="first's gang objects gone")
        assert native_gang(jobs, "second") == ["Workload", "PodGroup"]
    finally:
        reconciler.restart()


# ---- 2c. a job created as kubeflow.org/v2
V2_FAILURE_POLICY = {"maxRestarts": 2, "rules": [
    {"name": "evicted", "action": "RestartJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}


@pytest.mark.usefixtures("api_v2")  # opt-in: on from here to the end of the module, off again after it
def test_job_created_as_v2_is_admitted_and_runs(jobs: Jobs, queues: Queues, flavor_nodes: list[str]) -> None:
    """Kueue's MPIJob integration is built on the v2beta1 types: a job created as v2 reaches its webhook as
    v2beta1 (the API server converts through ours), is suspended and queued, admitted, placed and run; read
    back as v2 it still has its failurePolicy."""
    queue = queues.queue(cpu=JOB_CPU)
    job = queued_job("v2", queue)
    job["apiVersion"] = "kubeflow.org/v2"
    job["spec"]["runPolicy"]["failurePolicy"] = V2_FAILURE_POLICY
    created = jobs.cluster.rest.create(jobs.path("mpijobs", group="kubeflow.org/v2"), job)
    assert created["apiVersion"] == "kubeflow.org/v2"
    assert created["spec"]["runPolicy"]["suspend"] is True  # Kueue's mutating webhook, on the converted job
    assert created["spec"]["runPolicy"]["failurePolicy"] == V2_FAILURE_POLICY
    jobs.wait_condition("v2", "Running", timeout=90)
    admitted_placement(jobs, queues, "v2", flavor_nodes)
    finish_launcher(jobs, "v2")
    jobs.wait_condition("v2", "Succeeded", timeout=60)
    wait_finished_workload(queues, jobs, "v2")
    read = jobs.cluster.rest.get(jobs.path("mpijobs", "v2", "kubeflow.org/v2"))
    assert read["spec"]["runPolicy"]["failurePolicy"] == V2_FAILURE_POLICY


@pytest.mark.usefixtures("conversion_unreachable")
def test_kueue_works_without_the_conversion_webhook(jobs: Jobs, queues: Queues, flavor_nodes: list[str]) -> None:
    """Kueue reads and writes MPIJobs as v2beta1, the storage version: with the conversion webhook down, a job
    is still suspended by Kueue's webhook, admitted, placed and run to Succeeded."""
    queue = queues.queue(cpu=JOB_CPU)
    assert jobs.create(queued_job("unconverted", queue))["spec"]["runPolicy"]["suspend"] is True
    jobs.wait_condition("unconverted", "Running", timeout=90)
    admitted_placement(jobs, queues, "unconverted", flavor_nodes)
    finish_launcher(jobs, "unconverted")
    jobs.wait_condition("unconverted", "Succeeded", timeout=60)
    wait_finished_workload(queues, jobs, "unconverted")


# ---- 3. MultiKueue: managed by Kueue's MultiKueue controller, never by our reconciler
def test_multikueue_job_is_defaulted_and_validated_but_never_reconciled(
        jobs: Jobs, queues: Queues, reconciler: ReconcilerControl) -> None:
    name = jobs.ns
    queues.create("multikueueclusters", {"kind": "MultiKueueCluster", "metadata": {"name": name}, "spec": {
        "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": f"{name}-absent"}}}})
    queues.create("multikueueconfigs", {"kind": "MultiKueueConfig", "metadata": {"name": name},
                                        "spec": {"clusters": [name]}})
    queues.create("admissionchecks", {"kind": "AdmissionCheck", "metadata": {"name": name}, "spec": {
        "controllerName": MULTIKUEUE,
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": name}}})
    queue = queues.queue(cpu=JOB_CPU, flavor=False, admission_check=name)

    # Kueue's webhook defaults managedBy once its cache knows the queue's MultiKueue admission check
    def dispatched() -> JSON | None:
        probe = queued_job("probe", queue)
        result = jobs.cluster.kubectl("create", "--dry-run=server", "-n", jobs.ns, "-o", "json", "-f", "-",
                                      input=json.dumps(probe))
        if result.returncode != 0:
            return None
        created: JSON = json.loads(result.stdout)
        return created if created["spec"]["runPolicy"].get("managedBy") == MULTIKUEUE else None

    until(dispatched, timeout=30, what="Kueue defaulting managedBy for the MultiKueue queue")
    stored = jobs.create(queued_job("remote", queue))
    assert stored["spec"] == defaulted_spec({"cleanPodPolicy": "Running", "suspend": True, "managedBy": MULTIKUEUE})
    explicit = queued_job("explicit", queue)
    del explicit["metadata"]["labels"][QUEUE_LABEL]
    explicit["spec"]["runPolicy"]["managedBy"] = MULTIKUEUE
    # not queued: Kueue's webhook changes nothing (suspend is the CRD schema's default)
    assert jobs.create(explicit)["spec"] == defaulted_spec(
        {"cleanPodPolicy": "Running", "managedBy": MULTIKUEUE, "suspend": False}, kueue_mutated=False)

    invalid = queued_job("invalid", queue)
    invalid["spec"]["runPolicy"]["managedBy"] = MULTIKUEUE
    invalid["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] = 2
    with pytest.raises(ApiError) as denied:
        jobs.create(invalid)
    assert denied.value.status == 422
    assert "spec.mpiReplicaSpecs[Launcher].replicas: Invalid value: 2: must be 1" in denied.value.body

    # absence, proven by later syncs: the reconciler has seen both jobs and left them alone
    for key in (f"{jobs.ns}/remote", f"{jobs.ns}/explicit"):
        wait_for(functools.partial(_left_alone, reconciler, key), timeout=30, what=f"the reconciler leaving {key}")
    jobs.create(queued_job("sentinel", "none"))
    jobs.wait_condition("sentinel", "Created")
    for job in ("remote", "explicit"):
        assert not jobs.get(job).get("status")
        assert jobs.launcher(job) is None
        assert jobs.object("services", job) is None
        assert jobs.object("configmaps", f"{job}-config") is None
        assert jobs.object("secrets", f"{job}-ssh") is None
        assert jobs.workers(job) == []
    remote = jobs.get("remote")  # Kueue (the MultiKueue manager) queues it: a Workload, waiting for its check
    workload = until(lambda: queues.workload(remote), timeout=30, what="the Workload of the remote job")
    assert [c["name"] for c in workload["status"].get("admissionChecks") or []] in ([], [name])


def _left_alone(reconciler: ReconcilerControl, key: str) -> bool:
    """The reconciler's log has a sync of ``key`` whose outcome is "managed by" MultiKueue."""
    return reconciler.process.log_count(key) > 0 and any(
        key in line and f"managed by {MULTIKUEUE}" in line
        for line in reconciler.process.log.read_text(errors="replace").splitlines())


# ---- 4. webhook ordering
def mutations(log: Path, offset: int, namespace: str, name: str) -> list[tuple[int, str, str, bool]]:
    """(round, configuration, webhook, mutated) of each mutating webhook call on the MPIJob's CREATE, in the
    order the API server made them, from its audit annotations (``.../round_<r>_index_<i>``, where ``i`` is
    the webhook's position among all mutating webhooks, configurations sorted by name)."""
    for event in audit_events(log, offset=offset):
        ref = event.get("objectRef") or {}
        if (event.get("verb"), ref.get("resource"), ref.get("namespace"), ref.get("name"),
                event.get("stage")) == ("create", "mpijobs", namespace, name, "ResponseComplete"):
            calls = []
            for key, value in (event.get("annotations") or {}).items():
                if key.startswith(MUTATION_ANNOTATION):
                    _, round_, _, index = key[len(MUTATION_ANNOTATION):].split("_")
                    call = json.loads(value)
                    calls.append(((int(round_), int(index)),
                                  (int(round_), call["configuration"], call["webhook"], bool(call["mutated"]))))
            return [call for _, call in sorted(calls)]
    return []


@pytest.mark.parametrize("ours_first", [True, False], ids=["ours-first", "kueue-first"])
def test_webhook_order_does_not_matter(jobs: Jobs, kueue: Kueue, webhook: OperatorWebhook, ours_first: bool) -> None:
    assert jobs.cluster.audit_log is not None
    ours = next(c for c in webhook.configurations() if c["kind"] == "MutatingWebhookConfiguration")
    name = ("a-" if ours_first else "zz-") + ours["metadata"]["name"]
    assert (name < kueue.mutating_name) is ours_first  # the API server calls configurations in name order
    ours["metadata"]["name"] = name
    jobs.cluster.kubectl("delete", "mutatingwebhookconfiguration", webhook_name(webhook), check=True)
    try:
        jobs.cluster.kubectl("apply", "-f", "-", check=True, input=yaml.safe_dump(ours))
        job = queued_job("ordered", "no-such-queue")
        stored, offset = until(lambda: _created_when_both_mutated(jobs, job), timeout=30,
                               what="both webhooks mutating")
    finally:
        jobs.cluster.kubectl("delete", "mutatingwebhookconfiguration", name, "--ignore-not-found", check=True)
        webhook.register()
    assert stored["spec"] == defaulted_spec({"cleanPodPolicy": "Running", "suspend": True})
    log = jobs.cluster.audit_log
    calls = until(lambda: mutations(log, offset, jobs.ns, "ordered") or None, timeout=10,
                  what="the audit event of the CREATE")
    our_call, kueue_call = (name, OUR_DEFAULTER), (kueue.mutating_name, KUEUE_MPIJOB_MUTATOR)
    if ours_first:  # Kueue's change after ours makes the API server call ours again (IfNeeded): no change
        assert calls == [(0, *our_call, True), (0, *kueue_call, True), (1, *our_call, False)]
    else:  # Kueue's webhook has no reinvocationPolicy (Never): called once
        assert calls == [(0, *kueue_call, True), (0, *our_call, True)]


def webhook_name(webhook: OperatorWebhook) -> str:
    return str(next(c for c in webhook.configurations() if c["kind"] == "MutatingWebhookConfiguration")[
        "metadata"]["name"])


def _created_when_both_mutated(jobs: Jobs, job: JSON) -> tuple[JSON, int] | None:
    """Create ``job`` and return it with the audit log's size before; if the new configuration was not yet
    in effect (no defaults), delete it and return None to be retried."""
    assert jobs.cluster.audit_log is not None
    offset = jobs.cluster.audit_log.stat().st_size
    stored = jobs.create(job)
    if "sshAuthMountPath" in stored["spec"] and stored["spec"]["runPolicy"].get("suspend"):
        return stored, offset
    jobs.delete(job["metadata"]["name"])
    jobs.wait_gone("mpijobs", job["metadata"]["name"], "kubeflow.org/v2beta1")
    return None


# ---- last: what Kueue did above, it did with its own permissions
def test_kueue_ran_under_its_own_rbac(cluster: LocalCluster, kueue: Kueue) -> None:
    """Every request of Kueue's ServiceAccount in the audit log so far: none forbidden, and among them the
    MPIJob writes (suspend, templates) and Workload status writes of the tests above."""
    assert cluster.audit_log is not None
    user = f"system:serviceaccount:{KUEUE_NAMESPACE}:{KUEUE_SERVICE_ACCOUNT}"
    forbidden, writes = [], set()
    for event in audit_events(cluster.audit_log):
        if event.get("user", {}).get("username") != user or event.get("stage") != "ResponseComplete":
            continue
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "") + ("/" + ref["subresource"] if ref.get("subresource") else "")
        # RBAC's refusals only: an event Kueue records in a test namespace being deleted gets a 403 from
        # NamespaceLifecycle ("being terminated"), which RBAC allowed
        if (event.get("annotations") or {}).get("authorization.k8s.io/decision") == "forbid":
            forbidden.append((event["verb"], resource, ref.get("namespace"), ref.get("name")))
        elif event["verb"] in ("update", "patch") and event["responseStatus"]["code"] < 300:
            writes.add(resource)
    assert forbidden == []
    assert {"mpijobs", "workloads/status"} <= writes
