"""kubeflow.org/v2 through the real API server: created in one version and read in the other, kubectl with
both, and what a stopped conversion webhook breaks (docs/operator-guide.md, "The conversion webhook"). v2 is opt-in:
the module turns it on (deploy/crds-v2/) and off again after (the fixture api_v2)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from hack.devcluster import LocalCluster
from hack.devcluster.operators import OperatorWebhook
from hack.devcluster.wait import wait_for
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl

pytestmark = pytest.mark.usefixtures("api_v2")

ANNOTATION = "mpijobs.kubeflow.org/v2-spec"
POLICY = {"maxRestarts": 2, "rules": [{"name": "disrupted", "action": "RestartJob",
                                       "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
STORED_POLICY = ('{"spec":{"runPolicy":{"failurePolicy":{"maxRestarts":2,"rules":[{"action":"RestartJob",'
                 '"name":"disrupted","onPodConditions":[{"status":"True","type":"DisruptionTarget"}]}]}}}}')
CONTAINER = {"name": "main", "image": "mpi-image"}


def job(api_version: str, name: str, run_policy: dict[str, Any], annotations: dict[str, str] | None = None,
        ) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **({"annotations": annotations} if annotations else {})}
    return {"apiVersion": api_version, "kind": "MPIJob", "metadata": metadata, "spec": {
        "runPolicy": {**run_policy, "suspend": True},  # nothing to run: only the API matters here
        "mpiReplicaSpecs": {"Launcher": {"template": {"spec": {"containers": [dict(CONTAINER)]}}},
                            "Worker": {"replicas": 1, "template": {"spec": {"containers": [dict(CONTAINER)]}}}}}}


def kubectl(cluster: LocalCluster, namespace: str, *args: str, obj: Any = None) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("-n", namespace, *args, input=yaml.safe_dump(obj) if obj is not None else None)


def get(cluster: LocalCluster, namespace: str, resource: str, name: str) -> dict[str, Any]:
    result = kubectl(cluster, namespace, "get", resource, name, "-o", "json")
    assert result.returncode == 0, result.stderr
    loaded: dict[str, Any] = json.loads(result.stdout)
    return loaded


def same_version_in_both(cluster: LocalCluster, namespace: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The job read through v2beta1 and through v2 at one resourceVersion: a reconciler of an earlier test may
    write its status between two reads."""
    def both() -> tuple[dict[str, Any], dict[str, Any]] | None:
        stored = get(cluster, namespace, "mpijobs.v2beta1.kubeflow.org", name)
        served = get(cluster, namespace, "mpijobs.v2.kubeflow.org", name)
        same = stored["metadata"]["resourceVersion"] == served["metadata"]["resourceVersion"]
        return (stored, served) if same else None

    return until(both, timeout=30, what=f"{name} read at one resourceVersion through both versions")


def test_created_as_v2_read_as_v2beta1(cluster: LocalCluster, webhook: OperatorWebhook, namespace: str) -> None:
    created = kubectl(cluster, namespace, "create", "-f", "-",
                      obj=job("kubeflow.org/v2", "pi", {"cleanPodPolicy": "Running", "failurePolicy": POLICY}))
    assert created.returncode == 0, created.stderr
    stored, served = same_version_in_both(cluster, namespace, "pi")
    assert stored["apiVersion"] == "kubeflow.org/v2beta1"
    assert stored["metadata"]["annotations"] == {ANNOTATION: STORED_POLICY}
    assert stored["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "suspend": True}
    assert served["apiVersion"] == "kubeflow.org/v2"
    assert "annotations" not in served["metadata"]
    assert served["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "suspend": True, "failurePolicy": POLICY}
    assert {k: v for k, v in served.items() if k not in ("apiVersion", "metadata", "spec")} == {
        k: v for k, v in stored.items() if k not in ("apiVersion", "metadata", "spec")}


def test_created_as_v2beta1_read_as_v2(cluster: LocalCluster, webhook: OperatorWebhook, namespace: str) -> None:
    created = kubectl(cluster, namespace, "create", "-f", "-", obj=job(
        "kubeflow.org/v2beta1", "pi", {"cleanPodPolicy": "All"}, {ANNOTATION: STORED_POLICY, "team": "a"}))
    assert created.returncode == 0, created.stderr
    plain = kubectl(cluster, namespace, "create", "-f", "-", obj=job("kubeflow.org/v2beta1", "plain", {}))
    assert plain.returncode == 0, plain.stderr
    served = get(cluster, namespace, "mpijobs.v2.kubeflow.org", "pi")
    assert served["metadata"]["annotations"] == {"team": "a"}
    assert served["spec"]["runPolicy"] == {"cleanPodPolicy": "All", "suspend": True, "failurePolicy": POLICY}
    listed = json.loads(kubectl(cluster, namespace, "get", "mpijobs.v2.kubeflow.org", "-o", "json").stdout)
    assert [(i["apiVersion"], i["metadata"]["name"]) for i in listed["items"]] == [
        ("kubeflow.org/v2", "pi"), ("kubeflow.org/v2", "plain")]
    table = kubectl(cluster, namespace, "get", "mpijobs.v2.kubeflow.org").stdout.splitlines()
    assert table[0].split() == ["NAME", "STATE", "WORKERS", "READY", "RESTARTS", "AGE"]


def test_v2_refuses_what_v2beta1_stored(cluster: LocalCluster, webhook: OperatorWebhook, namespace: str) -> None:
    """The API server checks v2's enums itself (its order of values, not the webhook's sorted one)."""
    bad = job("kubeflow.org/v2", "pi", {"cleanPodPolicy": "Sometimes"})
    result = kubectl(cluster, namespace, "create", "--dry-run=server", "-f", "-", obj=bad)
    assert result.returncode != 0
    assert ('spec.runPolicy.cleanPodPolicy: Unsupported value: "Sometimes": supported values: "All", "Running", '
            '"None"') in result.stderr, result.stderr


# What a v2beta1 client may write (docs/proposals/v2.md): the pod condition's status left to its v2 default.
WITHOUT_STATUS = ('{"spec":{"runPolicy":{"failurePolicy":{"maxRestarts":2,"rules":[{"action":"RestartJob",'
                  '"name":"disrupted","onPodConditions":[{"type":"DisruptionTarget"}]}]}}}}')


@pytest.fixture
def defaulting_down(cluster: LocalCluster, webhook: OperatorWebhook, namespace: str) -> Iterator[None]:
    """The mutating webhook unregistered (it fails open, so this is the webhook down), as it was for a job stored
    without it: an annotation is then stored as the client wrote it."""
    cluster.kubectl("delete", "mutatingwebhookconfiguration", "mpijob-webhook", check=True)
    probe = job("kubeflow.org/v2beta1", "probe", {}, {ANNOTATION: WITHOUT_STATUS.replace(":", ": ")})

    def not_mutated() -> bool:
        result = kubectl(cluster, namespace, "create", "--dry-run=server", "-o", "json", "-f", "-", obj=probe)
        return result.returncode == 0 and json.loads(result.stdout)["metadata"]["annotations"] == probe[
            "metadata"]["annotations"]

    try:
        wait_for(not_mutated, timeout=30, interval=0.2, what="the API server no longer calling our mutating webhook")
        yield
    finally:
        webhook.register()


@pytest.mark.parametrize("update", ["label", "merge-patch"])
def test_v2_updates_a_job_whose_policy_was_stored_without_defaults(
        cluster: LocalCluster, webhook: OperatorWebhook, namespace: str, defaulting_down: None, update: str) -> None:
    """The API server gives a v2 request object the schema's defaults (status "True") but not the stored object
    converted to v2: a label, an annotation or a re-apply of the same policy is no change of the policy."""
    created = kubectl(cluster, namespace, "create", "-f", "-",
                      obj=job("kubeflow.org/v2beta1", "pi", {}, {ANNOTATION: WITHOUT_STATUS}))
    assert created.returncode == 0, created.stderr
    stored = get(cluster, namespace, "mpijobs.v2beta1.kubeflow.org", "pi")
    assert stored["metadata"]["annotations"] == {ANNOTATION: WITHOUT_STATUS}
    if update == "label":
        result = kubectl(cluster, namespace, "label", "mpijobs.v2.kubeflow.org", "pi", "team=a")
    else:
        result = kubectl(cluster, namespace, "patch", "mpijobs.v2.kubeflow.org", "pi", "--type=merge",
                         "-p", json.dumps({"metadata": {"labels": {"team": "a"}}}))
    assert result.returncode == 0, result.stderr
    served = get(cluster, namespace, "mpijobs.v2.kubeflow.org", "pi")
    assert served["metadata"]["labels"] == {"team": "a"}
    assert served["spec"]["runPolicy"] == {"suspend": True, "failurePolicy": POLICY}
    # a real change of the policy is still refused, by the API server's rule and by our webhook
    changed = kubectl(cluster, namespace, "patch", "mpijobs.v2.kubeflow.org", "pi", "--type=merge", "-p",
                      json.dumps({"spec": {"runPolicy": {"failurePolicy": {"maxRestarts": 3}}}}))
    assert changed.returncode != 0
    assert "failurePolicy" in changed.stderr, changed.stderr
    assert "immutable" in changed.stderr, changed.stderr


def test_kubectl_explain_v2(cluster: LocalCluster, webhook: OperatorWebhook) -> None:
    result = cluster.kubectl("explain", "mpijob.spec.runPolicy.failurePolicy", "--api-version", "kubeflow.org/v2")
    assert result.returncode == 0, result.stderr
    assert "GROUP:      kubeflow.org" in result.stdout
    assert "VERSION:    v2" in result.stdout
    assert "maxRestarts\t<integer>" in result.stdout
    assert "rules\t<[]Object> -required-" in result.stdout




def test_without_the_conversion_webhook_v2beta1_keeps_working(cluster: LocalCluster, webhook: OperatorWebhook,
                                                               namespace: str, conversion_unreachable: None) -> None:
    created = kubectl(cluster, namespace, "create", "-f", "-", obj=job("kubeflow.org/v2beta1", "pi", {}))
    assert created.returncode == 0, created.stderr

    def v2_read_fails() -> bool:
        result = kubectl(cluster, namespace, "get", "mpijobs.v2.kubeflow.org", "pi")
        return result.returncode != 0 and "conversion webhook for kubeflow.org/v2beta1, Kind=MPIJob failed" in (
            result.stderr)

    wait_for(v2_read_fails, timeout=30, interval=0.2, what="the API server using the unreachable conversion webhook")
    assert get(cluster, namespace, "mpijobs.v2beta1.kubeflow.org", "pi")["metadata"]["name"] == "pi"
    listed = kubectl(cluster, namespace, "get", "mpijobs.v2beta1.kubeflow.org", "-o", "name")
    assert listed.stdout == "mpijob.kubeflow.org/pi\n"


def test_without_the_conversion_webhook_the_reconciler_keeps_working(
        cluster: LocalCluster, reconciler: ReconcilerControl, namespace: str, conversion_unreachable: None) -> None:
    """The reconciler reads and writes v2beta1, the storage version, so it never calls the conversion webhook:
    a job created while the webhook is unreachable gets its worker, its launcher and its status."""
    unsuspended = job("kubeflow.org/v2beta1", "pi", {})
    unsuspended["spec"]["runPolicy"].pop("suspend")
    created = kubectl(cluster, namespace, "create", "-f", "-", obj=unsuspended)
    assert created.returncode == 0, created.stderr
    jobs = Jobs(cluster, namespace)
    assert [w["metadata"]["name"] for w in jobs.wait_workers("pi", 1)] == ["pi-worker-0"]
    assert jobs.wait_launcher("pi")["metadata"]["name"] == "pi-launcher"
    assert jobs.wait_condition("pi", "Created")["reason"] == "MPIJobCreated"


@pytest.mark.parametrize("version", ["v2", "v2beta1"])
def test_watch_through_each_version(cluster: LocalCluster, webhook: OperatorWebhook, namespace: str,
                                    version: str) -> None:
    """A watch through either version streams every job in that version, whichever version created it."""
    for api_version, name in (("kubeflow.org/v2", "made-as-v2"), ("kubeflow.org/v2beta1", "made-as-v2beta1")):
        created = kubectl(cluster, namespace, "create", "-f", "-", obj=job(api_version, name, {}))
        assert created.returncode == 0, created.stderr

    def watched() -> tuple[int, str] | None:
        """The watch's answer; None while the API server answers 429 "storage is (re)initializing" (its watch cache
        of a version just served, or of a CRD just changed by an earlier test: it asks the client to retry)."""
        answer = cluster.rest.request_raw(
            "GET", f"/apis/kubeflow.org/{version}/namespaces/{namespace}/mpijobs?watch=1&timeoutSeconds=2")
        return None if answer[0] == 429 else answer

    status, text = until(watched, timeout=30, interval=1.0, what="the API server's watch cache of MPIJobs ready")
    assert status == 200, text
    events = [json.loads(line) for line in text.splitlines() if line]
    # a reconciler of an earlier test may write the jobs' status meanwhile (MODIFIED, in the same version)
    assert {e["object"]["apiVersion"] for e in events} == {f"kubeflow.org/{version}"}
    assert sorted(e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED") == [
        "made-as-v2", "made-as-v2beta1"]
