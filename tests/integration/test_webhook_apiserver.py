"""The CRD and our webhooks through the real API server, with kubectl where a user would use it."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.devcluster import LocalCluster
from hack.devcluster.operators import REPO_ROOT, OperatorWebhook
from tests.reference import example_params, load_example

CONTAINER = {"name": "main", "image": "mpi-image"}


def mpijob(name: str, **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"mpiReplicaSpecs": {
        "Launcher": {"template": {"spec": {"containers": [dict(CONTAINER)]}}},
        "Worker": {"replicas": 2, "template": {"spec": {"containers": [dict(CONTAINER)]}}}}}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name},
            "spec": {**base, **spec}}


def kubectl(cluster: LocalCluster, namespace: str, *args: str, obj: Any = None) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("-n", namespace, *args, input=yaml.safe_dump(obj) if obj is not None else None)


def test_crd_is_established_with_short_name_and_columns(cluster: LocalCluster, webhook: OperatorWebhook,
                                                        namespace: str) -> None:
    crd = yaml.safe_load(cluster.kubectl("get", "crd", "mpijobs.kubeflow.org", "-o", "yaml", check=True).stdout)
    established = [c for c in crd["status"]["conditions"] if c["type"] == "Established"]
    assert established[0]["status"] == "True"
    kubectl(cluster, namespace, "create", "-f", "-", obj=mpijob("pi"))
    table = kubectl(cluster, namespace, "get", "mpij").stdout.splitlines()
    assert table[0].split() == ["NAME", "STATE", "WORKERS", "AGE"] or table[0].split()[:2] == ["NAME", "STATE"]
    assert table[1].split()[0] == "pi"
    assert kubectl(cluster, namespace, "get", "kubeflow", "-o", "name").stdout.strip() == "mpijob.kubeflow.org/pi"


@pytest.mark.parametrize("path", example_params())
def test_upstream_examples_are_accepted_and_stored_with_defaults(cluster: LocalCluster, webhook: OperatorWebhook,
                                                                 namespace: str, path: Path) -> None:
    created = kubectl(cluster, namespace, "create", "-f", str(path))
    assert created.returncode == 0, created.stderr
    name = load_example(path)["metadata"]["name"]
    stored = yaml.safe_load(kubectl(cluster, namespace, "get", "mpijob", name, "-o", "yaml").stdout)
    spec = stored["spec"]
    assert spec["launcherCreationPolicy"] == "AtStartup"
    assert spec["runLauncherAsWorker"] is False
    assert spec["runPolicy"]["suspend"] is False
    assert spec["mpiImplementation"] in ("OpenMPI", "Intel", "MPICH")
    assert spec["sshAuthMountPath"]
    # the Go defaults, which upstream never persists:
    assert spec["mpiReplicaSpecs"]["Launcher"]["replicas"] == 1
    assert spec["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] == "OnFailure"
    assert spec["mpiReplicaSpecs"]["Worker"]["restartPolicy"] == "Never"
    assert spec["runPolicy"]["cleanPodPolicy"] == load_example(path)["spec"]["runPolicy"]["cleanPodPolicy"]


def test_stored_object_equals_the_defaulted_input(cluster: LocalCluster, webhook: OperatorWebhook,
                                                  namespace: str) -> None:
    kubectl(cluster, namespace, "create", "-f", "-", obj=mpijob("pi"))
    stored = yaml.safe_load(kubectl(cluster, namespace, "get", "mpijob", "pi", "-o", "yaml").stdout)
    launcher = {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [
        {**CONTAINER, "resources": {}}]}}}
    worker = {"replicas": 2, "restartPolicy": "Never", "template": {"spec": {"containers": [
        {**CONTAINER, "resources": {}}]}}}
    for replica in (launcher, worker):  # the API server's core defaults inside a template, if any
        replica["template"] = stored["spec"]["mpiReplicaSpecs"]["Launcher" if replica is launcher else "Worker"][
            "template"]
    assert stored["spec"] == {
        "slotsPerWorker": 1, "runLauncherAsWorker": False, "sshAuthMountPath": "/root/.ssh",
        "launcherCreationPolicy": "AtStartup", "mpiImplementation": "OpenMPI",
        "runPolicy": {"cleanPodPolicy": "None", "suspend": False},
        "mpiReplicaSpecs": {"Launcher": launcher, "Worker": worker},
    }
    assert stored["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] == "mpi-image"


INVALID = [
    pytest.param(mpijob("1-pi"), ['metadata.name: Invalid value: "1-pi": will not able to create pod and service '
                                  'with invalid DNS label "1-pi-worker-1"'], id="invalid name"),
    pytest.param(mpijob("pi", slotsPerWorker=-1, runPolicy={"cleanPodPolicy": "Sometimes", "backoffLimit": -1}), [
        'spec.runPolicy.cleanPodPolicy: Unsupported value: "Sometimes": supported values: "All", "None", "Running"',
        "spec.runPolicy.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
        "spec.slotsPerWorker: Invalid value: -1: must be greater than or equal to 0"], id="invalid fields"),
    pytest.param({**mpijob("pi"), "spec": {"mpiReplicaSpecs": {}}},
                 ["spec.mpiReplicaSpecs[Launcher]: Required value: must have Launcher replica spec"],
                 id="empty replica specs"),
    pytest.param(mpijob("pi", mpiReplicaSpecs={
        "Launcher": {"replicas": 2, "restartPolicy": "Always", "template": {"spec": {"containers": [CONTAINER]}}},
        "Worker": {"replicas": 0, "restartPolicy": "Invalid", "template": {"spec": {"containers": [CONTAINER]}}}}), [
        'spec.mpiReplicaSpecs[Launcher].restartPolicy: Unsupported value: "Always"',
        "spec.mpiReplicaSpecs[Launcher].replicas: Invalid value: 2: must be 1",
        'spec.mpiReplicaSpecs[Worker].restartPolicy: Unsupported value: "Invalid"',
        "spec.mpiReplicaSpecs[Worker].replicas: Invalid value: 0: must be greater than or equal to 1"],
        id="invalid replica fields"),
    pytest.param(mpijob("pi", mpiReplicaSpecs={"Launcher": {"template": {"spec": {"containers": [CONTAINER]}}},
                                               "worker": {"replicas": 2}}),
                 ['spec.mpiReplicaSpecs[worker]: Unsupported value: "worker": supported values: "Launcher", '
                  '"Worker"; did you mean "Worker"?'], id="lowercase replica key"),
    pytest.param(mpijob("pi", launcherCreationPolicy="Later"),
                 ['spec.launcherCreationPolicy: Unsupported value: "Later"'], id="launcherCreationPolicy"),
]


@pytest.mark.parametrize("dry_run", [False, True], ids=["apply", "apply --dry-run=server"])
@pytest.mark.parametrize(("obj", "messages"), INVALID)
def test_invalid_mpijobs_are_rejected_with_field_paths(cluster: LocalCluster, webhook: OperatorWebhook,
                                                       namespace: str, obj: dict[str, Any], messages: list[str],
                                                       dry_run: bool) -> None:
    result = kubectl(cluster, namespace, "apply", *(["--dry-run=server"] if dry_run else []), "-f", "-", obj=obj)
    assert result.returncode != 0
    name = obj["metadata"]["name"]
    assert f'The MPIJob "{name}" is invalid: ' in result.stderr, result.stderr
    for message in messages:
        assert message in result.stderr
    assert kubectl(cluster, namespace, "get", "mpijobs", "-o", "name").stdout == ""


def test_managed_by_cannot_change(cluster: LocalCluster, api_v2: OperatorWebhook, namespace: str) -> None:
    assert kubectl(cluster, namespace, "create", "-f", "-", obj=mpijob("pi")).returncode == 0
    change = '{"spec":{"runPolicy":{"managedBy":"kueue.x-k8s.io/multikueue"}}}'
    result = kubectl(cluster, namespace, "patch", "mpijobs.v2beta1.kubeflow.org", "pi", "--type=merge", "-p", change)
    assert result.returncode != 0
    assert ('spec.runPolicy.managedBy: Invalid value: "kueue.x-k8s.io/multikueue": field is immutable'
            in result.stderr)
    # through kubeflow.org/v2 (opt-in; then kubectl's default, the preferred version) the API server's own rule
    # refuses it
    result = kubectl(cluster, namespace, "patch", "mpijobs.v2.kubeflow.org", "pi", "--type=merge", "-p", change)
    assert result.stderr == ('The MPIJob "pi" is invalid: spec.runPolicy.managedBy: Invalid value: '
                             "managedBy is immutable\n")
    labelled = kubectl(cluster, namespace, "label", "mpijobs.v2.kubeflow.org", "pi", "team=a")
    assert labelled.returncode == 0, labelled.stderr


def test_warnings_are_shown_by_kubectl(cluster: LocalCluster, webhook: OperatorWebhook, namespace: str) -> None:
    job = mpijob("pi")
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["securityContext"] = {"runAsUser": 1000}
    result = kubectl(cluster, namespace, "create", "-f", "-", obj=job)
    assert result.returncode == 0, result.stderr
    assert "Warning: spec.sshAuthMountPath: /root/.ssh is under /root but the Worker pods run as a non-root" in (
        result.stderr)


def test_crd_generator_agrees_with_this_api_server(cluster: LocalCluster) -> None:
    result = subprocess.run([sys.executable, "hack/gen/crd.py", "--from-server", "--kubeconfig",
                             str(cluster.kubeconfig), "--check"], check=False, capture_output=True, text=True,
                            cwd=REPO_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_update_keeps_working_for_kueue_style_edits(cluster: LocalCluster, webhook: OperatorWebhook,
                                                    namespace: str) -> None:
    job = mpijob("pi", runPolicy={"suspend": True})
    assert kubectl(cluster, namespace, "create", "-f", "-", obj=job).returncode == 0
    patch = {"spec": {"runPolicy": {"suspend": False}, "mpiReplicaSpecs": {"Launcher": {"template": {"spec": {
        "nodeSelector": {"example.com/accelerator": "a100"}}}}}}}
    result = kubectl(cluster, namespace, "patch", "mpijob", "pi", "--type=merge", "-p", yaml.safe_dump(patch))
    assert result.returncode == 0, result.stderr
    stored = yaml.safe_load(kubectl(cluster, namespace, "get", "mpijob", "pi", "-o", "yaml").stdout)
    assert stored["spec"]["runPolicy"]["suspend"] is False
    assert copy.deepcopy(stored["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["nodeSelector"]) == {
        "example.com/accelerator": "a100"}
