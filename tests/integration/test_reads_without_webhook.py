"""Reads never depend on our webhook (design rule 9): with the default CRD (deploy/crds/: kubeflow.org/v2beta1 alone,
no conversion webhook), `kubectl get/describe/delete mpijob`, the garbage collector's cascading deletion and the
namespace controller work as with upstream's CRD. And kubeflow.org/v2, opt-in, turned on, off and on again
(docs/operator-guide.md#kubeflow-orgv2-opt-in): a job created through v2 keeps its failurePolicy through the cycle.

No test here starts our webhook for its reads: the default CRD gives the API server nothing of ours to call. The
admission webhooks of the session, when registered by an earlier test, are called on CREATE and UPDATE only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from hack.devcluster import LocalCluster, api_v2
from hack.devcluster.mpijobs import create_owning_a_config_map, is_gone
from hack.devcluster.mpijobs import idle_mpijob as job
from hack.devcluster.operators import OperatorWebhook
from hack.devcluster.wait import wait_for
from tests.integration.conftest import namespace_name

ANNOTATION = "mpijobs.kubeflow.org/v2-spec"
POLICY = {"maxRestarts": 2, "rules": [{"name": "disrupted", "action": "RestartJob",
                                       "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
STORED_POLICY = ('{"spec":{"runPolicy":{"failurePolicy":{"maxRestarts":2,"rules":[{"action":"RestartJob",'
                 '"name":"disrupted","onPodConditions":[{"status":"True","type":"DisruptionTarget"}]}]}}}}')
JSON = dict[str, Any]


def kubectl(cluster: LocalCluster, namespace: str, *args: str, obj: Any = None) -> tuple[int, str, str]:
    result = cluster.kubectl("-n", namespace, *args, input=yaml.safe_dump(obj) if obj is not None else None)
    return result.returncode, result.stdout, result.stderr


@pytest.fixture
def default_crd(cluster: LocalCluster) -> None:
    """The session's CRD as deploy/crds/ ships it: v2beta1 alone, no conversion webhook."""
    assert api_v2.served_versions(cluster) == ["v2beta1"]
    crd = cluster.rest.get(api_v2.CRD_PATH)
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v2beta1"]


@pytest.mark.usefixtures("default_crd")
def test_kubectl_get_describe_and_delete(cluster: LocalCluster, namespace: str) -> None:
    code, _, err = kubectl(cluster, namespace, "create", "-f", "-", obj=job("pi"))
    assert code == 0, err
    code, out, err = kubectl(cluster, namespace, "get", "mpijob", "pi", "-o", "json")
    assert code == 0, err
    read = json.loads(out)
    assert (read["apiVersion"], read["metadata"]["name"]) == ("kubeflow.org/v2beta1", "pi")
    code, out, err = kubectl(cluster, namespace, "get", "mpijobs")
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines()] == ["NAME", "pi"]
    code, out, err = kubectl(cluster, namespace, "describe", "mpijob", "pi")
    assert code == 0, err
    assert out.splitlines()[:2] == ["Name:         pi", f"Namespace:    {namespace}"]
    code, out, err = kubectl(cluster, namespace, "delete", "mpijob", "pi", "--timeout=60s")
    assert code == 0, err
    assert out == f'mpijob.kubeflow.org "pi" deleted from {namespace} namespace\n'
    assert kubectl(cluster, namespace, "get", "mpijobs", "-o", "name")[1] == ""


@pytest.mark.usefixtures("default_crd")
@pytest.mark.parametrize("cascade", ["foreground", "background"])
def test_cascading_deletion_of_a_jobs_children(cluster: LocalCluster, namespace: str, cascade: str) -> None:
    """The garbage collector deletes what the job owns: foreground (kubectl waits until the child is gone and the
    job after it) and background (the job first, its child after)."""
    create_owning_a_config_map(cluster, namespace, "pi")
    code, _, err = kubectl(cluster, namespace, "delete", "mpijob", "pi", f"--cascade={cascade}", "--timeout=60s")
    assert code == 0, err
    child = f"/api/v1/namespaces/{namespace}/configmaps/pi-config"
    wait_for(lambda: is_gone(cluster, child), timeout=60, interval=0.2, what="the garbage collector deleting the child")
    assert is_gone(cluster, f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs/pi")


@pytest.mark.usefixtures("default_crd")
def test_deleting_a_namespace_that_holds_a_job(cluster: LocalCluster, request: pytest.FixtureRequest) -> None:
    """The namespace controller deletes the MPIJob and what it owns, and the namespace goes."""
    name = namespace_name(request.node.name)
    cluster.rest.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    create_owning_a_config_map(cluster, name, "pi")
    cluster.rest.request("DELETE", f"/api/v1/namespaces/{name}")
    wait_for(lambda: is_gone(cluster, f"/api/v1/namespaces/{name}"), timeout=90, interval=0.5,
             what=f"the namespace {name} deleted")


@pytest.fixture
def v2_off_after(cluster: LocalCluster, webhook: OperatorWebhook) -> Iterator[OperatorWebhook]:
    """The test turns kubeflow.org/v2 on and off itself; off again after it, whatever happened."""
    try:
        yield webhook
    finally:
        if api_v2.served_versions(cluster) != ["v2beta1"] or api_v2.conversion_strategy(cluster) != "None":
            api_v2.disable(cluster)


def test_v2_on_off_on_keeps_a_v2_jobs_failure_policy(cluster: LocalCluster, v2_off_after: OperatorWebhook,
                                                      namespace: str) -> None:
    webhook = v2_off_after
    # on: v2 is kubectl's preferred version, read through the conversion webhook
    webhook.enable_v2()
    code, _, err = kubectl(cluster, namespace, "create", "-f", "-",
                           obj=job("pi", "kubeflow.org/v2", {"failurePolicy": POLICY}))
    assert code == 0, err
    code, out, err = kubectl(cluster, namespace, "get", "mpijob", "pi", "-o", "json")
    assert code == 0, err
    served = json.loads(out)
    assert served["apiVersion"] == "kubeflow.org/v2"
    assert served["spec"]["runPolicy"]["failurePolicy"] == POLICY

    # off: the apply of deploy/crds/ alone is refused while the conversion's caBundle has another field manager
    # (here the harness's patch; cert-manager's cainjector or the reconciler's rotation on a real cluster)
    refused = cluster.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(api_v2.CRDS))
    assert refused.returncode != 0
    assert ("spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook"
            in refused.stderr), refused.stderr
    api_v2.disable(cluster)  # the guide's two commands: the conversion reset, then the apply
    crd = cluster.rest.get(api_v2.CRD_PATH)
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v2beta1"]
    assert "cert-manager.io/inject-ca-from" not in (crd["metadata"].get("annotations") or {})
    assert crd["status"]["storedVersions"] == ["v2beta1"]
    assert is_gone(cluster, f"/apis/kubeflow.org/v2/namespaces/{namespace}/mpijobs/pi")
    code, out, err = kubectl(cluster, namespace, "get", "mpijob", "pi", "-o", "json")
    assert code == 0, err
    stored = json.loads(out)
    assert stored["apiVersion"] == "kubeflow.org/v2beta1"
    assert stored["metadata"]["annotations"] == {ANNOTATION: STORED_POLICY}  # nothing lost: the policy stays here
    assert stored["spec"]["runPolicy"] == {k: v for k, v in served["spec"]["runPolicy"].items() if k != "failurePolicy"}

    # on again: the same policy reads back through v2
    webhook.enable_v2()
    code, out, err = kubectl(cluster, namespace, "get", "mpijob", "pi", "-o", "json")
    assert code == 0, err
    again = json.loads(out)
    assert again["apiVersion"] == "kubeflow.org/v2"
    assert again["spec"]["runPolicy"] == served["spec"]["runPolicy"]
    assert again["metadata"]["uid"] == served["metadata"]["uid"]
