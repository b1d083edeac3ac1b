"""Switching a live cluster between upstream's Go mpi-operator v0.8.2 and ours with `kubectl apply
--server-side`, as docs/migration.md describes, while an MPIJob runs on the real node.

The Go operator runs in a pod from upstream's own manifest (its module's deploy/v2beta1/mpi-operator.yaml,
applied unchanged) and image name (mpioperator/mpi-operator:0.8.2, the binary of hack/build/build-peer.sh packed
by hack/build/build-peer-image.sh). Back to upstream, then forward to ours: each is a rolling update of the
same Deployment `mpi-operator/mpi-operator` (our selector is upstream's), the Lease `mpi-operator` passes
to the new pod, and the job started under the Go operator finishes under ours with the same worker pods
and launcher Job. After the rollback to the Go operator and after the upgrade to ours, kubectl get/describe/delete
of MPIJobs, cascading deletion and namespace deletion work (tests/e2e/reads.py).
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hack.devcluster.binaries import REPO_ROOT
from hack.devcluster.mpijobs import JSON, conditions, get_job, launcher_log, wait_finished
from hack.devcluster.operator_deploy import CRDS, NAMESPACE, RECONCILER, lease_holder, reapply, webhook_ca_bundle
from hack.devcluster.realnode import RealNodeCluster, ctr
from hack.devcluster.wait import wait_for
from tests.e2e.jobs import apply, assert_pi, upstream_pi
from tests.e2e.reads import check_reads, plant

DEPLOYMENT = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{RECONCILER}"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/mpi-operator"
GO_IMAGE = "mpioperator/mpi-operator:0.8.2"
OUR_IMAGE = "mpijob-operator/reconciler:dev"
LAUNCHER_SLEEP = 75  # seconds the launcher waits before mpirun: longer than the switch to ours takes


def _script(name: str) -> str:
    result = subprocess.run(["bash", str(REPO_ROOT / "hack" / "build" / name)], capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        if shutil.which("go") is None:
            pytest.skip(f"Go is not installed: the upstream mpi-operator v0.8.2 cannot be built (hack/build/{name})")
        pytest.fail(f"hack/build/{name} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return result.stdout.strip().splitlines()[-1]


@dataclass(frozen=True)
class Upstream:
    manifest: Path  # upstream's deploy/v2beta1/mpi-operator.yaml, from the module hack/build/build-peer.sh builds
    ca_bundle: str  # our webhook's, to apply our overlay again after upstream's


@pytest.fixture
def upstream(real_cluster: RealNodeCluster, tmp_path: Path) -> Iterator[Upstream]:
    """Upstream's manifest, its image imported into the node; ours re-applied afterwards, whatever happened."""
    archive = _script("build-peer-image.sh")
    manifest = Path(_script("build-peer.sh")).parents[1] / "src" / "deploy" / "v2beta1" / "mpi-operator.yaml"
    ctr(real_cluster.node_paths.socket, "images", "import", archive)
    ca_bundle = webhook_ca_bundle(real_cluster)
    try:
        yield Upstream(manifest, ca_bundle)
    finally:
        reapply(real_cluster, tmp_path / "restore", ca_bundle)
        wait_for(lambda: _leading_pod(real_cluster, OUR_IMAGE), 120, 0.5, what="ours back, leading")


def _leading_pod(cluster: RealNodeCluster, image: str) -> JSON | None:
    """The Deployment rolled out: one pod left, running ``image``, Ready, holding the Lease."""
    dep = cluster.rest.get(DEPLOYMENT)
    status = dep.get("status") or {}
    pods = cluster.rest.get(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app.kubernetes.io/name={RECONCILER}")
    if not (status.get("observedGeneration") == dep["metadata"]["generation"]
            and status.get("updatedReplicas") == status.get("replicas") == status.get("availableReplicas") == 1
            and len(pods["items"]) == 1):
        return None
    pod: JSON = pods["items"][0]
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))
    ours = pod["spec"]["containers"][0]["image"] == image and ready and not pod["metadata"].get("deletionTimestamp")
    return pod if ours and lease_holder(cluster).startswith(pod["metadata"]["name"] + "_") else None


def _sleepy_pi() -> JSON:
    """Upstream's pi example whose launcher waits before mpirun, so the job is mid-run during the switch.
    On the Open MPI 4 image: the launcher is the Go operator's, whose environment Open MPI 5 ignores (its
    ranks would all run on the launcher, kubeflow/mpi-operator#842), and a running launcher is kept as is."""
    job = upstream_pi("openmpi4", "pi")
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    launcher["command"] = ["/bin/sh", "-c"]
    launcher["args"] = [f"sleep {LAUNCHER_SLEEP} && exec mpirun {' '.join(launcher['args'])}"]
    return copy.deepcopy(job)


def _running(cluster: RealNodeCluster, namespace: str) -> dict[str, str] | None:
    """Pod name -> UID of the job's two workers and one launcher pod, once all are Running."""
    pods = cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=training.kubeflow.org/job-name=pi")
    running = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods["items"]
               if p.get("status", {}).get("phase") == "Running"}
    return running if len(running) == 3 and len(pods["items"]) == 3 else None


def test_upstream_and_back_to_ours_while_a_job_runs(real_cluster: RealNodeCluster, namespace: str,
                                                   upstream: Upstream, tmp_path: Path) -> None:
    deployment_uid = real_cluster.rest.get(DEPLOYMENT)["metadata"]["uid"]
    # Back to upstream (docs/migration.md, "Ours -> Go operator"): admit its pod, drop our webhook, apply.
    real_cluster.kubectl("label", "namespace", NAMESPACE, "pod-security.kubernetes.io/enforce-", check=True)
    real_cluster.kubectl("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration", "mpijob-webhook",
                         check=True)
    real_cluster.kubectl("-n", NAMESPACE, "delete", "deployment,service,poddisruptionbudget", "mpijob-webhook",
                         check=True)
    transitions = real_cluster.rest.get(LEASE)["spec"].get("leaseTransitions", 0)
    began = time.monotonic()
    # docs/migration.md: our CRD handed to a field manager of its own first, or upstream's CRD, applied by kubectl
    # as ours was, would drop our v2 conversion webhook (and be refused)
    real_cluster.kubectl("apply", "--server-side", "--field-manager=mpijob-crd", "-k", str(CRDS), check=True)
    real_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(upstream.manifest), check=True)
    go_pod = wait_for(lambda: _leading_pod(real_cluster, GO_IMAGE), 120, 0.5, what="the Go operator leading")
    assert go_pod is not None
    print(f"\nours -> Go: the Go pod leads {time.monotonic() - began:.1f} s after kubectl apply")
    assert real_cluster.rest.get(DEPLOYMENT)["metadata"]["uid"] == deployment_uid, "the same Deployment, updated"
    assert real_cluster.rest.get(LEASE)["spec"]["leaseTransitions"] == transitions + 1
    assert go_pod["spec"]["containers"][0]["args"] == ["-alsologtostderr", "--lock-namespace=mpi-operator"]
    check_reads(real_cluster, plant(real_cluster, "rolled-back"))  # no webhook of ours left in any read path

    # A job started by the Go operator ...
    apply(real_cluster, namespace, _sleepy_pi())
    before = wait_for(lambda: _running(real_cluster, namespace), 120, 0.5, what="the job's pods Running under Go")
    wait_for(lambda: conditions(get_job(real_cluster, namespace, "pi")).get("Running", {}).get("status") == "True",
             60, 0.5, what="the Go operator's Running condition")

    # ... and ours applied over upstream's (docs/migration.md, "Go operator -> ours"): a rolling update again.
    began = time.monotonic()
    reapply(real_cluster, tmp_path / "forward", upstream.ca_bundle)
    ours = wait_for(lambda: _leading_pod(real_cluster, OUR_IMAGE), 120, 0.5, what="ours rolled out, leading")
    assert ours is not None
    print(f"Go -> ours: our pod leads {time.monotonic() - began:.1f} s after kubectl apply")
    assert real_cluster.rest.get(DEPLOYMENT)["metadata"]["uid"] == deployment_uid
    assert real_cluster.rest.get(LEASE)["spec"]["leaseTransitions"] == transitions + 2
    assert ours["spec"]["containers"][0]["name"] == "mpi-operator"
    assert _running(real_cluster, namespace) == before, "the job's pods kept, still running, when ours took over"
    assert "Succeeded" not in conditions(get_job(real_cluster, namespace, "pi"))

    outcome, final = wait_finished(real_cluster, namespace, "pi", timeout=LAUNCHER_SLEEP + 120)
    assert outcome == "Succeeded", conditions(final)
    assert_pi(launcher_log(real_cluster, namespace, "pi"), ["pi-worker-0", "pi-worker-1"])
    assert final["status"]["replicaStatuses"]["Launcher"].get("succeeded") == 1
    check_reads(real_cluster, plant(real_cluster, "upgraded"))  # after the upgrade from upstream to ours
