"""Kueue's Topology Aware Scheduling with our operator: ranks follow the topology (docs/kueue.md, "Topology Aware
Scheduling").

A real Kueue (hack/devcluster/kueue.py, TopologyAwareScheduling on by default since v0.14) admits MPIJobs to a
ResourceFlavor with a Topology of block, rack and host over 12 kwok nodes (one block, 3 racks of 4 nodes, 2 pod
slots each). Kueue ranks the pods of each PodSet by ``training.kubeflow.org/replica-index`` minus the PodSet's
offset and ungates rank r onto the r-th pod slot of its topology assignment; the tests check that worker i lands
on the host of its rank, that the hostfile lists the hosts in that order (so MPI rank r runs there), that
``render --explain-topology`` names the same domains, and, as a negative control, what Kueue does when the ranks
do not fit (a launcher+worker PodSet group without runLauncherAsWorker): greedy placement, logged by Kueue.
Our admission refusals are compared with the real Kueue webhook's answers for the same jobs.
Skipped only when Go is absent and Kueue is not built.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.kueue import VERSION, Kueue, KueueUnavailableError, find_kueue
from hack.devcluster.nodes import NodePool, build_node, unready_nodes
from hack.devcluster.operators import OperatorWebhook
from hack.devcluster.rest import ApiError
from hack.devcluster.wait import wait_for
from reconciler.explain_topology import explain
from reconciler.render import admitted
from shared.api import defaulted_dict, parse_mpijob, validate
from shared.api import kueue_topology as kt
from shared.api.field_errors import aggregate
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl

JSON = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
HOSTNAME = "kubernetes.io/hostname"
BLOCK, RACK, POOL = "tas-test/block", "tas-test/rack", "tas-test/pool"
RACKS, NODES_PER_RACK, SLOTS_PER_NODE = 3, 4, 2
RACK_SLOTS = NODES_PER_RACK * SLOTS_PER_NODE
REPLICA_INDEX = "training.kubeflow.org/replica-index"
HANG = {"test.mpijob/outcome": "hang"}  # the launcher runs until the test ends (hack/devcluster/kwok-stages)


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
    process = Kueue(cluster, tmp_path_factory.mktemp("kueue-tas"), build)
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
                (keep / "kueue-tas.log").write_bytes(process.log.read_bytes())


@pytest.fixture(scope="module")
def racks(cluster: LocalCluster) -> Iterator[dict[str, str]]:
    """12 kwok nodes labelled with block b0, racks r0..r2 (4 nodes each) and the flavor's pool label, 2 CPUs (pod
    slots) each; node -> rack. Deleted afterwards."""
    pool = NodePool(count=RACKS * NODES_PER_RACK, cpu=str(SLOTS_PER_NODE), name_prefix="tas-node-")
    rack_of = {}
    for i in range(pool.count):
        node = build_node(pool, i)
        rack_of[node["metadata"]["name"]] = f"r{i // NODES_PER_RACK}"
        node["metadata"]["labels"].update({BLOCK: "b0", RACK: f"r{i // NODES_PER_RACK}", POOL: "tas"})
        cluster.rest.create("/api/v1/nodes", node)
    try:
        wait_for(lambda: not unready_nodes(cluster.rest, list(rack_of)), timeout=60, what="the rack nodes Ready")
        yield rack_of
    finally:
        for name in rack_of:
            with contextlib.suppress(ApiError):
                cluster.rest.request("DELETE", f"/api/v1/nodes/{name}")


class Queue:
    """A Topology, a ResourceFlavor over the rack nodes with that topology, a ClusterQueue and a LocalQueue, all
    named after the test's namespace; the cluster-scoped ones deleted afterwards."""

    def __init__(self, cluster: LocalCluster, namespace: str) -> None:
        self.cluster, self.ns, self.name = cluster, namespace, namespace
        self.created: list[str] = []

    def create(self, plural: str, obj: JSON, namespaced: bool = False) -> None:
        path = f"/apis/{KUEUE}/" + (f"namespaces/{self.ns}/" if namespaced else "") + plural
        self.cluster.rest.create(path, {"apiVersion": KUEUE, **obj})
        if not namespaced:
            self.created.append(f"{path}/{obj['metadata']['name']}")

    def install(self) -> str:
        meta = {"name": self.name}
        self.create("topologies", {"kind": "Topology", "metadata": meta, "spec": {"levels": [
            {"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]}})
        self.create("resourceflavors", {"kind": "ResourceFlavor", "metadata": meta,
                                        "spec": {"nodeLabels": {POOL: "tas"}, "topologyName": self.name}})
        quota = str(RACKS * NODES_PER_RACK * SLOTS_PER_NODE)
        self.create("clusterqueues", {"kind": "ClusterQueue", "metadata": meta, "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.ns}},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": self.name, "resources": [{"name": "cpu", "nominalQuota": quota}]}]}]}})
        self.create("localqueues", {"kind": "LocalQueue", "metadata": meta, "spec": {"clusterQueue": self.name}},
                    namespaced=True)

        def active() -> bool:
            queue = self.cluster.rest.get(f"/apis/{KUEUE}/clusterqueues/{self.name}")
            return any(c["type"] == "Active" and c["status"] == "True"
                       for c in (queue.get("status") or {}).get("conditions") or [])

        wait_for(active, timeout=30, what=f"ClusterQueue {self.name} Active")
        return self.name

    def workload(self, job: JSON) -> JSON | None:
        uid = job["metadata"]["uid"]
        for item in self.cluster.rest.get(f"/apis/{KUEUE}/namespaces/{self.ns}/workloads")["items"]:
            if any(ref.get("uid") == uid for ref in item["metadata"].get("ownerReferences") or []):
                return dict(item)
        return None

    def cleanup(self) -> None:
        for path in reversed(self.created):
            with contextlib.suppress(ApiError):
                self.cluster.rest.request("DELETE", path)


@pytest.fixture
def queue(cluster: LocalCluster, namespace: str, kueue: Kueue, racks: dict[str, str]) -> Iterator[Queue]:
    q = Queue(cluster, namespace)
    try:
        yield q
    finally:
        q.cleanup()


@pytest.fixture
def jobs(cluster: LocalCluster, namespace: str, queue: Queue) -> Iterator[Jobs]:
    """The test's namespace; afterwards its MPIJobs, Workloads and pods are gone (while Kueue, which holds
    finalizers on the Workloads, still runs) before the next test needs the nodes."""
    yield Jobs(cluster, namespace)
    base = f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs"
    cluster.rest.request("DELETE", base, {"propagationPolicy": "Background"})
    workloads = f"/apis/{KUEUE}/namespaces/{namespace}/workloads"
    cluster.rest.request("DELETE", workloads, {"propagationPolicy": "Background"})
    wait_for(lambda: not cluster.rest.get(workloads)["items"], timeout=60, what="the Workloads gone")
    pods = f"/api/v1/namespaces/{namespace}/pods"
    wait_for(lambda: not cluster.rest.get(pods)["items"], timeout=60, what="the pods gone")


# ---- the job and what Kueue made of it
def container() -> JSON:
    return {"name": "main", "image": "mpi-image", "resources": {"requests": {"cpu": "1"}}}


def tas_job(name: str, queue: str, workers: int, *, launcher: JSON | None = None, worker: JSON | None = None,
            launcher_as_worker: bool = False) -> JSON:
    """An MPIJob of one launcher and ``workers`` workers (one CPU each), with these template annotations."""
    def template(annotations: JSON | None, labels: JSON | None = None) -> JSON:
        meta = {key: value for key, value in (("annotations", annotations), ("labels", labels)) if value}
        return {**({"metadata": meta} if meta else {}), "spec": {"containers": [container()]}}

    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
            "spec": {"slotsPerWorker": 1, "runLauncherAsWorker": launcher_as_worker, "mpiReplicaSpecs": {
                "Launcher": {"template": template(launcher, HANG)},
                "Worker": {"replicas": workers, "template": template(worker)}}}}


def slot_hosts(workload: JSON, podset: str) -> list[str]:
    """The host of each pod slot of the PodSet's topology assignment, in rank order (Kueue's ``rankToDomainID``;
    with the hostname level lowest, Kueue stores only that level)."""
    [assignment] = [a["topologyAssignment"] for a in workload["status"]["admission"]["podSetAssignments"]
                    if a["name"] == podset]
    assert assignment["levels"] == [HOSTNAME]
    hosts = []
    for piece in assignment["slices"]:
        values, counts = piece["valuesPerLevel"][0], piece["podCounts"]
        for i in range(piece["domainCount"]):
            individual = values.get("individual") or {}
            host = values.get("universal") or (
                (individual.get("prefix") or "") + individual["roots"][i] + (individual.get("suffix") or ""))
            hosts += [host] * (counts["universal"] if "universal" in counts else counts["individual"][i])
    return hosts


def admitted_workload(queue: Queue, jobs: Jobs, name: str) -> JSON:
    stored = jobs.get(name)

    def found() -> JSON | None:
        workload = queue.workload(stored)
        admission = ((workload or {}).get("status") or {}).get("admission") or {}
        return workload if all(a.get("topologyAssignment") for a in admission.get("podSetAssignments") or [{}]) \
            and admission else None

    return until(found, timeout=60, what=f"the Workload of {name} admitted with a topology assignment")


def placed(jobs: Jobs, name: str, workers: int) -> tuple[list[JSON], JSON]:
    """The workers, in index order, and the launcher pod, once every one is ungated and bound to a node."""
    def bound(pod: JSON) -> bool:
        return not pod["spec"].get("schedulingGates") and bool(pod["spec"].get("nodeName"))

    def ready() -> tuple[list[JSON], JSON] | None:
        pods = jobs.workers(name)
        launchers = [p for p in jobs.pods(f"training.kubeflow.org/job-name={name},"
                                          "training.kubeflow.org/job-role=launcher")
                     if not p["metadata"].get("deletionTimestamp")]
        if len(pods) != workers or len(launchers) != 1 or not all(map(bound, [*pods, *launchers])):
            return None
        return sorted(pods, key=lambda p: int(p["metadata"]["name"].rsplit("-", 1)[1])), launchers[0]

    return until(ready, timeout=90, what=f"the {workers} workers and the launcher of {name} ungated and bound")


def hostfile_nodes(jobs: Jobs, name: str, pods: dict[str, JSON]) -> list[str]:
    """The node of each hostfile line, in order: where MPI rank r (one slot per host) runs."""
    hostfile = jobs.must("configmaps", f"{name}-config")["data"]["hostfile"]
    return [pods[line.split(".", 1)[0]]["spec"]["nodeName"] for line in hostfile.splitlines()]


def rank_fallbacks(kueue: Kueue, namespace: str) -> list[str]:
    """Kueue's log lines saying it could not read the ranks of a PodSet of this namespace."""
    return [line for line in kueue.log.read_text(errors="replace").splitlines()
            if "failed to read rank information from pods" in line and namespace in line]


def explained_domains(jobs: Jobs, name: str, workload: JSON) -> dict[str, str | None]:
    """``render --explain-topology --workload``'s domain of each pod, for the stored job and its Workload."""
    job, _, _ = admitted(jobs.get(name))
    return {pod.pod: pod.domain for podset in explain(job, workload) for pod in podset.pods}


def assert_ranked(jobs: Jobs, queue: Queue, kueue: Kueue, name: str, workers: list[JSON], first_rank: int,
                  slots: list[str]) -> None:
    """Worker i carries replica-index ``first_rank + i`` and runs on the host of slot i, as its ungating
    nodeSelector says; Kueue read the ranks (no fallback logged). Every worker carries what Kueue wrote into the
    Worker template verbatim (its labels, its annotations exactly)."""
    template = jobs.get(name)["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    assert template["spec"]["schedulingGates"] == [{"name": kt.TOPOLOGY_GATE}]
    for i, pod in enumerate(workers):
        assert pod["metadata"]["annotations"] == template["metadata"]["annotations"]
        assert pod["metadata"]["labels"].items() >= template["metadata"]["labels"].items()
        assert pod["metadata"]["labels"][REPLICA_INDEX] == str(first_rank + i)
        assert pod["spec"]["nodeSelector"] == {POOL: "tas", HOSTNAME: slots[i]}, pod["metadata"]["name"]
        assert pod["spec"]["nodeName"] == slots[i], pod["metadata"]["name"]
    assert rank_fallbacks(kueue, jobs.ns) == []


# ---- 1. ranks follow the topology
def test_worker_i_runs_on_the_host_kueue_assigned_to_rank_i(jobs: Jobs, queue: Queue, kueue: Kueue,
                                                            racks: dict[str, str]) -> None:
    """8 workers requiring one rack (8 slots): worker i on slot i's host, consecutive ranks two to a host, all in
    one rack, the hostfile in the same order; explain-topology names the same hosts."""
    name = "ranked"
    jobs.create(tas_job(name, queue.install(), RACK_SLOTS, worker={kt.REQUIRED: RACK}))
    workload = admitted_workload(queue, jobs, name)
    slots = slot_hosts(workload, "worker")
    workers, launcher = placed(jobs, name, RACK_SLOTS)
    assert_ranked(jobs, queue, kueue, name, workers, 0, slots)
    assert len({racks[host] for host in slots}) == 1
    assert Counter(slots) == dict.fromkeys(set(slots), SLOTS_PER_NODE)
    assert slots == sorted(slots)  # consecutive ranks share a host, and so a rack
    assert hostfile_nodes(jobs, name, {p["metadata"]["name"]: p for p in workers}) == slots
    assert explained_domains(jobs, name, workload) == {
        f"{name}-launcher": None,  # one pod without an index: greedy, which for one pod is the same
        **{p["metadata"]["name"]: f"{HOSTNAME}={slots[i]}" for i, p in enumerate(workers)}}
    launcher_host = slot_hosts(workload, "launcher")[0]
    assert launcher["spec"]["nodeName"] == launcher_host
    assert launcher["spec"]["nodeSelector"] == {POOL: "tas", HOSTNAME: launcher_host}  # ungated by Kueue
    launcher_job = jobs.must("jobs", f"{name}-launcher", "batch/v1")  # resumed with Kueue's gate, kept verbatim
    assert launcher_job["spec"]["template"]["spec"]["schedulingGates"] == [{"name": kt.TOPOLOGY_GATE}]


def test_launcher_as_worker_ranks_workers_after_kueues_offset(jobs: Jobs, queue: Queue, kueue: Kueue,
                                                               racks: dict[str, str]) -> None:
    """runLauncherAsWorker: the launcher is replica-index 0 and worker i is i+1; Kueue's webhook puts
    pod-index-offset 1 on the Worker template, so worker i still takes slot i; the hostfile lists the launcher,
    then the workers in their slots' order."""
    name = "launcher-worker"
    stored = jobs.create(tas_job(name, queue.install(), RACK_SLOTS, worker={kt.REQUIRED: RACK},
                                 launcher_as_worker=True))
    assert stored["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"] == {
        kt.REQUIRED: RACK, kt.POD_INDEX_OFFSET: "1"}
    workload = admitted_workload(queue, jobs, name)
    slots = slot_hosts(workload, "worker")
    workers, launcher = placed(jobs, name, RACK_SLOTS)
    assert_ranked(jobs, queue, kueue, name, workers, 1, slots)
    assert {p["metadata"]["annotations"][kt.POD_INDEX_OFFSET] for p in workers} == {"1"}
    assert launcher["metadata"]["labels"][REPLICA_INDEX] == "0"
    assert len({racks[host] for host in slots}) == 1
    assert slots == sorted(slots)
    pods = {p["metadata"]["name"]: p for p in workers} | {f"{name}-launcher": launcher}
    assert hostfile_nodes(jobs, name, pods) == [launcher["spec"]["nodeName"], *slots]
    assert explained_domains(jobs, name, workload) == {
        f"{name}-launcher": f"{HOSTNAME}={slot_hosts(workload, 'launcher')[0]}",
        **{p["metadata"]["name"]: f"{HOSTNAME}={slots[i]}" for i, p in enumerate(workers)}}


def test_launcher_as_worker_in_one_podset_group_shares_the_rack(jobs: Jobs, queue: Queue, kueue: Kueue,
                                                                racks: dict[str, str]) -> None:
    """runLauncherAsWorker with launcher and workers in one PodSet group requiring a rack: the group's ranks run
    launcher 0, worker i at i+1 (no offset annotation: the group supplies it), all 8 pods in one rack."""
    name = "grouped"
    annotations = {kt.GROUP: "mpi", kt.REQUIRED: RACK}
    stored = jobs.create(tas_job(name, queue.install(), RACK_SLOTS - 1, launcher=annotations, worker=annotations,
                                 launcher_as_worker=True))
    assert stored["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"] == annotations
    workload = admitted_workload(queue, jobs, name)
    slots = slot_hosts(workload, "worker")
    workers, launcher = placed(jobs, name, RACK_SLOTS - 1)
    assert_ranked(jobs, queue, kueue, name, workers, 1, slots)
    assert launcher["spec"]["nodeName"] == slot_hosts(workload, "launcher")[0]
    assert len({racks[p["spec"]["nodeName"]] for p in [*workers, launcher]}) == 1
    assert explained_domains(jobs, name, workload) == {
        f"{name}-launcher": f"{HOSTNAME}={slot_hosts(workload, 'launcher')[0]}",
        **{p["metadata"]["name"]: f"{HOSTNAME}={slots[i]}" for i, p in enumerate(workers)}}


# ---- 2. negative control: ranks Kueue cannot use
def test_without_usable_ranks_kueue_places_the_workers_greedily(jobs: Jobs, queue: Queue, kueue: Kueue,
                                                                racks: dict[str, str]) -> None:
    """A launcher+worker PodSet group without runLauncherAsWorker (admission warns): the group ranks the workers
    from 1 while their indexes start at 0, so worker 0 has rank -1; Kueue logs it and ungates the whole worker
    PodSet greedily, in the order its cache lists the pods. The workers fill the assigned slots, but not by
    index: explain-topology says so and names no domain."""
    name = "greedy"
    annotations = {kt.GROUP: "mpi", kt.REQUIRED: RACK}
    jobs.create(tas_job(name, queue.install(), RACK_SLOTS - 1, launcher=annotations, worker=annotations))
    workload = admitted_workload(queue, jobs, name)
    slots = slot_hosts(workload, "worker")
    workers, _ = placed(jobs, name, RACK_SLOTS - 1)
    assert Counter(p["spec"]["nodeName"] for p in workers) == Counter(slots)  # the assignment, in some order
    fallbacks = until(lambda: rank_fallbacks(kueue, jobs.ns) or None, timeout=30, what="Kueue's fallback logged")
    assert any("rank -1 of Pod" in line and f"{jobs.ns}/{name}-worker-0" in line for line in fallbacks), fallbacks
    job, _, _ = admitted(jobs.get(name))
    [_, worker_ranks] = explain(job, workload)
    assert worker_ranks.fallback == f"rank -1 of {name}-worker-0 is below 0"
    assert {pod.domain for pod in worker_ranks.pods} == {None}
    off_rank = [p["metadata"]["name"] for i, p in enumerate(workers) if p["spec"]["nodeName"] != slots[i]]
    print(f"[greedy] workers off their index's slot: {len(off_rank)} of {len(workers)}: {off_rank}",
          file=sys.stderr)


# ---- 3. the same refusals as Kueue's webhook
REFUSED = [  # worker (and launcher) template annotations Kueue's MPIJob webhook refuses, with a readable request
    ({kt.REQUIRED: RACK, kt.PREFERRED: RACK}, None),
    ({kt.REQUIRED: "rack/", kt.UNCONSTRAINED: "maybe"}, None),
    ({kt.REQUIRED: RACK, kt.SLICE_REQUIRED: HOSTNAME, kt.SLICE_SIZE: "20"}, None),
    ({kt.REQUIRED: RACK, kt.SLICE_SIZE: "two"}, None),
    ({kt.GROUP: "7", kt.REQUIRED: RACK}, {kt.GROUP: "7", kt.REQUIRED: BLOCK}),
    ({kt.GROUP: "g", kt.PREFERRED: RACK}, {kt.GROUP: "h", kt.PREFERRED: RACK}),
    ({kt.GROUP: "g"}, None),
    ({kt.REQUIRED: BLOCK, kt.SLICE_CONSTRAINTS: json.dumps(
        [{"topology": RACK, "size": 4}, {"topology": RACK, "size": 3}])}, None),
]


def kueue_denial(cluster: LocalCluster, kueue: Kueue, job: JSON) -> str | None:
    """The message of Kueue's validating MPIJob webhook for creating ``job`` (None when it allows it), asked
    directly, as the API server asks it."""
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "00000000-0000-0000-0000-000000000001", "operation": "CREATE", "namespace": "default",
        "name": job["metadata"]["name"], "kind": {"group": "kubeflow.org", "version": "v2beta1", "kind": "MPIJob"},
        "resource": {"group": "kubeflow.org", "version": "v2beta1", "resource": "mpijobs"},
        "userInfo": {"username": "test"}, "object": job}}
    request = urllib.request.Request(kueue.url("/validate-kubeflow-org-v2beta1-mpijob"),
                                     data=json.dumps(review).encode(), headers={"Content-Type": "application/json"})
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        response = json.loads(answer.read())["response"]
    return None if response["allowed"] else str(response["status"]["message"])


def our_message(job: JSON) -> str | None:
    """What our validation (the webhook's and the reconciler's) says of ``job``, as the API server aggregates it
    (None: nothing)."""
    model, errors = parse_mpijob(defaulted_dict({**job, "metadata": {**job["metadata"], "namespace": "default"}}))
    assert model is not None
    assert errors == []
    refused = validate(model)
    return aggregate(refused) if refused else None


def test_admission_refuses_what_kueue_refuses_with_kueues_reason(cluster: LocalCluster, kueue: Kueue,
                                                                 jobs: Jobs) -> None:
    """For each job Kueue's webhook refuses, our validation gives exactly Kueue's message, and the API server
    refuses the job; Kueue allows the control job, and so do we."""
    allowed = tas_job("allowed", "q", 3, worker={kt.REQUIRED: RACK})
    assert kueue_denial(cluster, kueue, allowed) is None
    assert our_message(allowed) is None
    jobs.create(allowed)
    for i, (worker, launcher) in enumerate(REFUSED):
        job = tas_job(f"refused-{i}", "q", 3, worker=worker, launcher=launcher)
        kueues = kueue_denial(cluster, kueue, job)
        assert kueues is not None, worker
        assert our_message(job) == kueues, worker
        with pytest.raises(ApiError) as denied:  # by ours or Kueue's, whichever answers first: the same reason
            jobs.create(job)
        assert denied.value.status in (403, 422)
        assert kueues in json.loads(denied.value.body)["message"]
