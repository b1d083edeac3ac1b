"""Kubeflow Training Operator v1 on the same cluster (docs/migration.md, "Kubeflow Training Operator v1"). Its MPIJob
CRD has this operator's name, ``mpijobs.kubeflow.org``, and serves ``kubeflow.org/v1`` only. Against a real API server
holding it and one v1 MPIJob: our CRD applied over it is refused (the API server's own answer, quoted in the docs);
our reconciler exits at once naming the cause; the documented switch (the v1 MPIJobs exported and deleted, the CRD
deleted, ours applied) leaves a cluster that serves kubeflow.org/v2beta1 MPIJobs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
import yaml

from hack.devcluster import LocalCluster
from hack.devcluster.binaries import find_bin_dir
from hack.devcluster.gomodules import GoUnavailableError, module_dir
from hack.devcluster.processes import free_port
from hack.devcluster.rest import ApiError
from hack.devcluster.wait import wait_for
from reconciler.__main__ import TRAINING_OPERATOR_CRD
from tests.integration.conftest import MPIJOB_CRD, REPO_ROOT

MODULE, VERSION = "github.com/kubeflow/training-operator", "v1.8.1"  # its last v1 on the module proxy
CRD = "manifests/base/crds/kubeflow.org_mpijobs.yaml"
REFUSED = ('status.storedVersions[0]: Invalid value: "v1": missing from spec.versions; v1 was previously a storage '
           "version, and must remain in spec.versions until a storage migration ensures no data remains persisted "
           "in v1 and removes v1 from status.storedVersions")
V1_JOB = {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "metadata": {"name": "v1-pi", "namespace": "default"},
          "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {
              "Launcher": {"replicas": 1, "template": {"spec": {"containers": [{"name": "l", "image": "pi"}]}}},
              "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "w", "image": "pi"}]}}}}}}


def wait_established(cluster: LocalCluster) -> None:
    def established() -> bool:
        crd = cluster.rest.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/mpijobs.kubeflow.org")
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])

    wait_for(established, timeout=60, what="the MPIJob CRD Established", ignore=(ApiError,))


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """A control plane of its own with Training Operator v1.8.1's MPIJob CRD (from its Go module) and one v1 job."""
    try:
        crd = module_dir(MODULE, VERSION) / CRD
    except GoUnavailableError as error:
        pytest.skip(str(error))
    with LocalCluster(nodes=1, bin_dir=find_bin_dir()) as local:
        local.kubectl("apply", "-f", str(crd), check=True)  # as its install (kubectl apply -k) does
        wait_established(local)
        local.rest.create("/apis/kubeflow.org/v1/namespaces/default/mpijobs", V1_JOB)
        yield local


def test_our_crd_over_the_training_operators_is_refused_by_the_api_server(cluster: LocalCluster) -> None:
    for apply in (["apply", "--server-side"], ["apply", "--server-side", "--force-conflicts"], ["replace"]):
        answer = cluster.kubectl(*apply, "-f", str(MPIJOB_CRD))
        assert answer.returncode == 1, answer.stdout
        assert answer.stderr.strip() == f'The CustomResourceDefinition "mpijobs.kubeflow.org" is invalid: {REFUSED}'
    versions = cluster.kubectl("get", "crd", "mpijobs.kubeflow.org", "-o", "jsonpath={.spec.versions[*].name}")
    assert versions.stdout == "v1", "left as it was"


def test_the_reconciler_exits_at_once_naming_the_training_operator(cluster: LocalCluster) -> None:
    process = subprocess.run(
        [sys.executable, "-m", "reconciler", f"--kubeConfig={cluster.kubeconfig}", f"--health-port={free_port()}",
         "--monitoring-port=0"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert process.returncode == 1, process.stderr
    last = process.stderr.strip().splitlines()[-2:]
    assert TRAINING_OPERATOR_CRD.replace('"', '\\"') in last[0], process.stderr
    assert last[1].endswith('msg="CRD doesn\'t exist. Exiting"'), process.stderr


def test_the_documented_switch_leaves_our_crd_serving(cluster: LocalCluster) -> None:
    """docs/migration.md's steps: export the v1 MPIJobs, delete them and the CRD, apply ours."""
    exported = cluster.kubectl("get", "mpijobs.v1.kubeflow.org", "-A", "-o", "yaml", check=True).stdout
    assert [job["metadata"]["name"] for job in yaml.safe_load(exported)["items"]] == ["v1-pi"]
    cluster.kubectl("delete", "mpijobs.v1.kubeflow.org", "--all", "-A", "--wait", check=True)
    cluster.kubectl("delete", "crd", "mpijobs.kubeflow.org", "--wait", check=True)
    cluster.kubectl("apply", "--server-side", "-f", str(MPIJOB_CRD), check=True)
    wait_established(cluster)
    served = wait_for(lambda: cluster.rest.get("/apis/kubeflow.org/v2beta1/mpijobs"), timeout=30,
                      what="v2beta1 MPIJobs served", ignore=(ApiError,))  # 429 while its storage initializes
    assert served["items"] == []
    versions = cluster.kubectl("get", "crd", "mpijobs.kubeflow.org", "-o",
                               "jsonpath={.spec.versions[*].name} {.status.storedVersions}", check=True)
    assert versions.stdout == 'v2beta1 ["v2beta1"]'
