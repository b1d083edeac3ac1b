"""MultiKueue (docs/kueue.md, "MultiKueue"): the session cluster is the manager (Kueue with a MultiKueue admission
check, our webhook and reconciler); a second control plane on this machine is the worker (its own etcd and API
server, kwok nodes, Kueue, our webhook and reconciler: hack/devcluster/multikueue.py).

A job submitted to the manager is defaulted to ``managedBy: kueue.x-k8s.io/multikueue`` by Kueue's webhook, left
alone by our reconciler there (no child, no status write, no event), copied by Kueue to the worker without
``managedBy``, run there by our reconciler, and its status copied back by Kueue. Launchers labelled
``test.mpijob/outcome=hang`` run until the test relabels their pod (hack/devcluster/kwok-stages).
Skipped only when Go is absent and Kueue is not built.
"""

from __future__ import annotations

import contextlib
import copy
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import yaml

from hack.devcluster import LocalCluster
from hack.devcluster.kueue import NAMESPACE as KUEUE_NAMESPACE
from hack.devcluster.kueue import Kueue, KueueBuild, KueueUnavailableError, find_kueue
from hack.devcluster.multikueue import CONTROLLER_NAME, KUEUE_API, WorkerCluster, connection_objects
from hack.devcluster.rest import JSON, ApiError
from hack.devcluster.wait import WaitTimeoutError, wait_for
from tests import run_figures
from tests.integration.mpijobs import Jobs, history, until
from tests.integration.operator_fixtures import ReconcilerControl

WORKER = "worker-1"
ORIGIN = "mpijob-manager"
WORKER_LOST_SECONDS = 20  # the manager's multiKueue.workerLostTimeout (Kueue's default: 15 min)
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PREBUILT_ANNOTATION = "kueue.x-k8s.io/prebuilt-workload-name"
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
WORKER_POD_LABEL = "kueue.x-k8s.io/multikueue-worker-workload-pod"
OUTCOME_LABEL = "test.mpijob/outcome"
OUR_COMPONENT = "mpi-job-controller"
JOB_CPU = 3  # one launcher and two workers, one CPU each
FIGURES = "MultiKueue (two control planes on this machine)"


# ---- fixtures
@pytest.fixture(scope="module")
def kueue_build(pytestconfig: pytest.Config) -> KueueBuild:
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    try:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            return find_kueue()
    except KueueUnavailableError as err:
        pytest.skip(str(err))


@pytest.fixture(scope="module")
def worker(cluster: LocalCluster, kueue_build: KueueBuild,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerCluster]:
    """The worker cluster, for this module only."""
    began = time.monotonic()
    keep = cluster.keep_logs / "multikueue-worker" if cluster.keep_logs is not None else None
    local = WorkerCluster(tmp_path_factory.mktemp("worker"), kueue_build, bin_dir=cluster.bin_dir, keep_logs=keep)
    local.start()
    print(f"[harness] MultiKueue worker ready in {time.monotonic() - began:.1f}s "
          f"({', '.join(f'{k} {v:.1f}s' for k, v in local.timings.items())})", file=sys.stderr, flush=True)
    try:
        yield local
    finally:
        logs = local.logs()
        local.stop()
        if keep is not None:
            with contextlib.suppress(OSError):
                keep.mkdir(parents=True, exist_ok=True)
                for name, path in logs.items():
                    (keep / f"{name}.log").write_bytes(path.read_bytes())


@pytest.fixture(scope="module")
def manager_kueue(cluster: LocalCluster, reconciler: ReconcilerControl, kueue_build: KueueBuild,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kueue]:
    """Kueue on the session cluster as a MultiKueue manager (a short workerLostTimeout), for this module only."""
    process = Kueue(cluster, tmp_path_factory.mktemp("manager-kueue"), kueue_build, multikueue={
        "gcInterval": "5s", "origin": ORIGIN, "workerLostTimeout": f"{WORKER_LOST_SECONDS}s"})
    process.install_crds()
    process.install_rbac()
    process.start()
    try:
        process.wait_ready()
        process.register()
        yield process
    finally:
        process.stop()
        if cluster.keep_logs is not None:
            with contextlib.suppress(OSError):
                cluster.keep_logs.mkdir(parents=True, exist_ok=True)
                (cluster.keep_logs / "kueue-manager.log").write_bytes(process.log.read_bytes())


@pytest.fixture(scope="module")
def connected(cluster: LocalCluster, manager_kueue: Kueue, worker: WorkerCluster) -> Iterator[str]:
    """The manager's Secret, MultiKueueCluster, MultiKueueConfig and AdmissionCheck for the worker, once Kueue
    reports the cluster connected and the check active; the AdmissionCheck's name."""
    paths = []
    for obj in connection_objects(WORKER, worker.manager_kubeconfig(WORKER)):
        cluster.kubectl("apply", "-f", "-", check=True, input=yaml.safe_dump(obj))
        plural = {"Secret": f"api/v1/namespaces/{KUEUE_NAMESPACE}/secrets"}.get(
            str(obj["kind"]), f"apis/{KUEUE_API}/{str(obj['kind']).lower()}s")
        paths.append(f"/{plural}/{WORKER}")
    try:
        wait_for(lambda: conditions(cluster.rest.get(paths[1])).get("Active", ("",))[0] == "True", timeout=60,
                 what="the MultiKueueCluster Active")
        wait_for(lambda: conditions(cluster.rest.get(paths[3])).get("Active", ("",))[0] == "True", timeout=60,
                 what="the AdmissionCheck Active")
        yield WORKER
    finally:
        for path in reversed(paths):
            with contextlib.suppress(ApiError):
                cluster.rest.request("DELETE", path)


@dataclass
class Pair:
    """One test's namespace on both clusters, with the same queue on each."""

    manager: Jobs
    worker: Jobs
    queue: str


def _queue(cluster: LocalCluster, namespace: str, admission_check: str | None) -> list[str]:
    """A ResourceFlavor, a ClusterQueue of JOB_CPU CPUs (with the admission check) and a LocalQueue, all named
    after the namespace; the paths of the cluster-scoped ones."""
    base = f"/apis/{KUEUE_API}"
    cluster.rest.create(f"{base}/resourceflavors", {"apiVersion": KUEUE_API, "kind": "ResourceFlavor",
                                                     "metadata": {"name": namespace}, "spec": {}})
    spec: JSON = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                  "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                      {"name": namespace, "resources": [{"name": "cpu", "nominalQuota": str(JOB_CPU)}]}]}]}
    if admission_check:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": admission_check}]}
    cluster.rest.create(f"{base}/clusterqueues", {"apiVersion": KUEUE_API, "kind": "ClusterQueue",
                                                   "metadata": {"name": namespace}, "spec": spec})
    cluster.rest.create(f"{base}/namespaces/{namespace}/localqueues", {
        "apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": namespace},
        "spec": {"clusterQueue": namespace}})
    wait_for(lambda: conditions(cluster.rest.get(f"{base}/clusterqueues/{namespace}")).get(
        "Active", ("",))[0] == "True", timeout=60, what=f"ClusterQueue {namespace} Active")
    return [f"{base}/clusterqueues/{namespace}", f"{base}/resourceflavors/{namespace}"]


def _drain(cluster: LocalCluster, namespace: str) -> None:
    """Delete the namespace's MPIJobs and Workloads and wait for the Workloads to go (Kueue holds finalizers)."""
    cluster.rest.request("DELETE", f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs",
                         {"propagationPolicy": "Background"})
    workloads = f"/apis/{KUEUE_API}/namespaces/{namespace}/workloads"
    cluster.rest.request("DELETE", workloads, {"propagationPolicy": "Background"})
    wait_for(lambda: not cluster.rest.get(workloads)["items"], timeout=60, what=f"the Workloads of {namespace} gone")


@pytest.fixture
def pair(cluster: LocalCluster, namespace: str, worker: WorkerCluster, connected: str) -> Iterator[Pair]:
    """The test's namespace and queue on the manager (its ClusterQueue with the MultiKueue check) and, mirrored as
    MultiKueue requires, on the worker; both drained and removed afterwards."""
    remote = worker.cluster
    remote.rest.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": namespace}})
    created = _queue(remote, namespace, None) + _queue(cluster, namespace, connected)
    try:
        yield Pair(Jobs(cluster, namespace), Jobs(remote, namespace), namespace)
    finally:
        for local in (cluster, remote):
            with contextlib.suppress(Exception):  # the worker's API server may be the one a test took away
                _drain(local, namespace)
        for path in created:
            with contextlib.suppress(Exception):
                (remote if path in created[:2] else cluster).rest.request("DELETE", path)
        with contextlib.suppress(Exception):
            remote.rest.request("DELETE", f"/api/v1/namespaces/{namespace}", {"propagationPolicy": "Background"})


# ---- helpers
def conditions(obj: JSON) -> dict[str, tuple[str, str]]:
    """type -> (status, reason) of every condition of ``obj``."""
    status = obj.get("status") or {}
    assert isinstance(status, dict)
    return {c["type"]: (c["status"], c.get("reason", "")) for c in status.get("conditions") or []}


def queued_job(name: str, queue: str) -> JSON:
    """One launcher (held running by its label) and two workers, one CPU each, for the LocalQueue ``queue``."""
    def template(labels: dict[str, str] | None = None) -> JSON:
        spec = {"containers": [{"name": "main", "image": "mpi-image", "resources": {"requests": {"cpu": "1"}}}]}
        return {"metadata": {"labels": labels}, "spec": spec} if labels else {"spec": spec}

    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
            "spec": {"slotsPerWorker": 1, "runPolicy": {"cleanPodPolicy": "Running"}, "mpiReplicaSpecs": {
                "Launcher": {"template": template({OUTCOME_LABEL: "hang"})},
                "Worker": {"replicas": 2, "template": template()}}}}


def children_on(jobs: Jobs) -> dict[str, list[str]]:
    """Every object our reconciler could create in the namespace, by kind (names; the default ServiceAccount's
    kube-root-ca.crt ConfigMap left out)."""
    found = {}
    for plural, group in (("pods", ""), ("services", ""), ("configmaps", ""), ("secrets", ""), ("jobs", "batch/v1"),
                          ("podgroups", "scheduling.k8s.io/v1alpha2")):
        try:
            items = jobs.cluster.rest.get(jobs.path(plural, group=group))["items"]
        except ApiError as error:
            if error.status == 404:  # an API this cluster does not serve
                continue
            raise
        found[plural] = sorted(i["metadata"]["name"] for i in items if i["metadata"]["name"] != "kube-root-ca.crt")
    return found


def our_events(jobs: Jobs, job: str) -> list[str]:
    """The reasons of the events our reconciler recorded about ``job``."""
    return [e["reason"] for e in jobs.events(job) if OUR_COMPONENT in (
        (e.get("source") or {}).get("component"), e.get("reportingComponent"))]


def workload_of(jobs: Jobs, job: str) -> JSON | None:
    stored = jobs.object("mpijobs", job, "kubeflow.org/v2beta1")
    if stored is None:
        return None
    uid = stored["metadata"]["uid"]
    for item in jobs.cluster.rest.get(jobs.path("workloads", group=KUEUE_API))["items"]:
        if any(ref.get("uid") == uid for ref in item["metadata"].get("ownerReferences") or []):
            return dict(item)
    return None


def running_on_worker(pair: Pair, name: str) -> float:
    """Submit ``name`` on the manager; the seconds until the worker's copy has Running=True (the figure)."""
    began = time.monotonic()
    created = pair.manager.create(queued_job(name, pair.queue))
    assert created["spec"]["runPolicy"]["managedBy"] == CONTROLLER_NAME  # Kueue's webhook, for the MultiKueue queue
    assert created["spec"]["runPolicy"]["suspend"] is True
    until(lambda: conditions(pair.worker.object("mpijobs", name, "kubeflow.org/v2beta1") or {}).get(
        "Running", ("",))[0] == "True", timeout=120, what=f"the worker's copy of {name} Running")
    took = time.monotonic() - began
    run_figures.add(FIGURES, f"submission on the manager to Running on the worker: {took:.1f}s ({name})")
    return took


def remote_spec(manager_spec: JSON) -> JSON:
    """The spec of the worker's copy: the manager's (Kueue's admission marks included) without managedBy, its pod
    templates marked by the worker's Kueue as a MultiKueue workload's."""
    spec = copy.deepcopy(manager_spec)
    del spec["runPolicy"]["managedBy"]
    for replica in spec["mpiReplicaSpecs"].values():
        replica["template"].setdefault("metadata", {}).setdefault("labels", {})[WORKER_POD_LABEL] = "true"
    return spec


def mirrored(status: JSON) -> JSON:
    """A worker's status as Kueue copies it to the manager: through upstream's Go types (kubeflow/mpi-operator
    v2beta1 JobStatus), which have no ``readyWorkers`` (this operator's, the Ready column)."""
    return {key: value for key, value in status.items() if key != "readyWorkers"}


def wait_mirrored(pair: Pair, job: str, timeout: float = 60) -> JSON:
    """The status of ``job`` once the manager's is the worker's as Kueue copies it; on a timeout, both in the
    failure."""
    seen: dict[str, JSON] = {}

    def same() -> JSON | None:
        seen["manager"], seen["worker"] = pair.manager.get(job).get("status") or {}, pair.worker.get(job).get(
            "status") or {}
        return seen["manager"] if seen["manager"] == mirrored(seen["worker"]) else None

    try:
        return until(same, timeout=timeout, what=f"the manager's status of {job} mirroring the worker's")
    except WaitTimeoutError:
        pytest.fail(f"the manager's status of {job} is not the worker's:\n{json.dumps(seen, indent=1)}")


def launcher_pod(jobs: Jobs, job: str) -> JSON:
    def running() -> JSON | None:
        pods = [p for p in jobs.pods(f"training.kubeflow.org/job-name={job},training.kubeflow.org/job-role=launcher")
                if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
        return pods[0] if len(pods) == 1 else None

    return until(running, timeout=60, what=f"the running launcher pod of {job}")


def assert_left_alone(pair: Pair, job: str) -> None:
    """On the manager: no child object of ours and no event of ours (only Kueue writes the job's status)."""
    assert children_on(pair.manager) == {"pods": [], "services": [], "configmaps": [], "secrets": [], "jobs": [],
                                         "podgroups": []}
    assert our_events(pair.manager, job) == []


# ---- tests
def test_job_runs_on_the_worker_and_its_status_is_mirrored(pair: Pair, reconciler: ReconcilerControl) -> None:
    running_on_worker(pair, "pi")
    manager_job = pair.manager.get("pi")
    remote = pair.worker.get("pi")
    workload = workload_of(pair.manager, "pi")
    assert workload is not None
    # Kueue's copy: the manager's labels plus its origin, the prebuilt Workload's name as an annotation (Kueue's
    # WorkloadIdentifierAnnotations, on in v0.19), managedBy cleared for our operator
    assert remote["metadata"]["labels"] == {QUEUE_LABEL: pair.queue, ORIGIN_LABEL: ORIGIN}
    assert remote["metadata"]["annotations"] == {PREBUILT_ANNOTATION: workload["metadata"]["name"]}
    assert "managedBy" not in remote["spec"]["runPolicy"]
    assert remote["spec"] == remote_spec(manager_job["spec"])
    assert manager_job["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "managedBy": CONTROLLER_NAME,
                                                "suspend": False}  # admitted on the manager too
    assert remote["spec"]["runPolicy"]["suspend"] is False
    assert pair.worker.launcher("pi") is not None
    assert len(pair.worker.workers("pi")) == 2

    # the manager's status is the worker's, as Kueue copies it
    wait_mirrored(pair, "pi")
    assert conditions(pair.manager.get("pi"))["Running"] == ("True", "MPIJobRunning")
    assert_left_alone(pair, "pi")

    launcher = launcher_pod(pair.worker, "pi")
    since = pair.worker.get("pi")["metadata"]["resourceVersion"]
    pair.worker.cluster.rest.merge_patch(pair.worker.path("pods", launcher["metadata"]["name"]),
                                         {"metadata": {"labels": {OUTCOME_LABEL: "succeed"}}})

    def finished_workload() -> JSON | None:
        found = workload_of(pair.manager, "pi")
        return found if found is not None and conditions(found).get("Finished", ("",))[0] == "True" else None

    # Kueue copies the worker's status once more as it finishes the manager's Workload, then deletes the remote
    # copy: whatever our reconciler writes on the worker in between (the workers it cleans up) is not copied
    finished = until(finished_workload, timeout=90, what="the manager's Workload Finished")
    assert conditions(finished)["Finished"] == ("True", "Succeeded")
    pair.worker.wait_gone("mpijobs", "pi", "kubeflow.org/v2beta1", timeout=90)  # Kueue removes the remote copy
    manager_job = pair.manager.get("pi")
    assert conditions(manager_job)["Succeeded"] == ("True", "MPIJobSucceeded")
    final = manager_job.get("status") or {}
    remote_statuses = [mirrored(obj.get("status") or {}) for _, obj in history(
        pair.worker.cluster, pair.worker.path("mpijobs", group="kubeflow.org/v2beta1"), since)
        if obj["metadata"]["name"] == "pi"]
    assert final in remote_statuses, (
        f"the manager's status is none the worker had:\n{json.dumps({'manager': final, 'worker': remote_statuses})}")
    assert_left_alone(pair, "pi")
    assert reconciler.process.log_count(f"managed by {CONTROLLER_NAME}") > 0


def test_deleting_on_the_manager_removes_the_remote_copy(pair: Pair) -> None:
    running_on_worker(pair, "gone")
    remote_uid = pair.worker.get("gone")["metadata"]["uid"]
    pair.manager.delete("gone")
    pair.worker.wait_gone("mpijobs", "gone", "kubeflow.org/v2beta1", timeout=90)
    wait_for(lambda: not [p for p in pair.worker.pods() if any(
        r.get("uid") == remote_uid for r in p["metadata"].get("ownerReferences") or [])] and not pair.worker.pods(
        "training.kubeflow.org/job-name=gone"), timeout=90, what="the remote copy's pods gone")
    wait_for(lambda: not pair.worker.cluster.rest.get(pair.worker.path("workloads", group=KUEUE_API))["items"],
             timeout=60, what="the remote Workload gone")
    pair.manager.wait_gone("mpijobs", "gone", "kubeflow.org/v2beta1", timeout=60)
    assert_left_alone(pair, "gone")



def test_zz_lost_worker_is_reported_as_kueue_reports_it(pair: Pair, worker: WorkerCluster) -> None:
    """The worker's API server killed mid-job: Kueue marks its MultiKueueCluster inactive at once and, after
    workerLostTimeout, evicts the manager's Workload (its check back to Pending for another worker) and suspends the
    job there; the job's status stays as last copied. Our reconciler still leaves the job alone. (Last in the
    module: the worker's API server comes back, but its Kueue may still be reconnecting.)"""
    running_on_worker(pair, "lost")
    last_copied = wait_mirrored(pair, "lost")
    manager_cluster = f"/apis/{KUEUE_API}/multikueueclusters/{WORKER}"
    began = time.monotonic()
    next(p for p in worker.cluster.processes if p.name == "kube-apiserver").kill()
    try:
        until(lambda: conditions(pair.manager.cluster.rest.get(manager_cluster))["Active"] == (
            "False", "ClientConnectionFailed"), timeout=60, what="the MultiKueueCluster inactive")

        def evicted() -> JSON | None:
            found = workload_of(pair.manager, "lost")
            return found if found is not None and "Evicted" in conditions(found) else None

        workload = until(evicted, timeout=WORKER_LOST_SECONDS + 60, what="the manager's Workload evicted")
        run_figures.add(FIGURES, f"worker lost to the manager's Workload evicted: {time.monotonic() - began:.1f}s "
                                 f"(workerLostTimeout {WORKER_LOST_SECONDS}s)")
        assert conditions(workload)["Evicted"] == ("True", "AdmissionCheck")
        checks = [{k: v for k, v in check.items() if k != "lastTransitionTime"}
                  for check in workload["status"]["admissionChecks"]]
        assert checks == [{"name": WORKER, "state": "Pending", "retryCount": 1,
                           "message": "Reset to Pending after eviction. Previously: Retry"}]
        until(lambda: pair.manager.get("lost")["spec"]["runPolicy"]["suspend"] is True, timeout=30,
              what="Kueue suspending the job on the manager")
        job = pair.manager.get("lost")
        assert job["spec"]["runPolicy"]["managedBy"] == CONTROLLER_NAME
        assert job.get("status") == last_copied
        assert_left_alone(pair, "lost")
    finally:
        worker.cluster.restart("kube-apiserver")
    until(lambda: conditions(pair.manager.cluster.rest.get(manager_cluster))["Active"] == ("True", "Active"),
          timeout=90, what="the MultiKueueCluster active again")
