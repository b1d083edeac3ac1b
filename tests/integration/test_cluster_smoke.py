"""The local control plane behaves like a cluster: the checks of control-plane.md section 5, step 4.

They use the built kubectl, as a user would, and wait on conditions with deadlines.
"""

from __future__ import annotations

import json
from typing import Any

from hack.devcluster import LocalCluster, wait_for
from tests.integration.conftest import MPIJOB_CRD

TIMEOUT = 60.0
Obj = dict[str, Any]


def kubectl_json(cluster: LocalCluster, *args: str) -> Obj:
    out = cluster.kubectl(*args, "-o", "json", check=True).stdout
    result: Obj = json.loads(out)
    return result


def apply(cluster: LocalCluster, namespace: str, *objects: Obj) -> None:
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
    cluster.kubectl("-n", namespace, "create", "-f", "-", input=manifest, check=True)


def pod(name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        resources: dict[str, str] | None = None) -> Obj:
    container: Obj = {"name": "main", "image": "busybox"}
    if resources:
        container["resources"] = {"requests": resources, "limits": resources}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "spec": {"containers": [container], "restartPolicy": "Never"}}


def job(name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> Obj:
    template = pod(name, labels=labels, annotations=annotations)
    del template["metadata"]["name"], template["apiVersion"], template["kind"]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": template}}


def condition(obj: Obj, kind: str) -> str | None:
    return next((c["status"] for c in obj.get("status", {}).get("conditions") or [] if c["type"] == kind), None)


def job_pods(cluster: LocalCluster, namespace: str, job_name: str) -> list[Obj]:
    items: list[Obj] = kubectl_json(cluster, "-n", namespace, "get", "pods", "-l",
                                    f"batch.kubernetes.io/job-name={job_name}")["items"]
    return items


def phase_of(cluster: LocalCluster, namespace: str, name: str) -> str:
    return str(kubectl_json(cluster, "-n", namespace, "get", "pod", name).get("status", {}).get("phase"))


def test_apiserver_is_ready_and_reports_its_version(cluster: LocalCluster) -> None:
    assert cluster.kubectl("get", "--raw", "/readyz", check=True).stdout == "ok"
    assert kubectl_json(cluster, "version")["serverVersion"]["gitVersion"] == "v1.36.3"


def test_nodes_are_ready_and_schedulable(cluster: LocalCluster) -> None:
    nodes = kubectl_json(cluster, "get", "nodes")["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == ["kwok-node-0", "kwok-node-1", "kwok-node-2"]
    for node in nodes:
        assert condition(node, "Ready") == "True"
        assert not node["spec"].get("unschedulable")
        assert not [t for t in node["spec"].get("taints") or [] if t["key"] == "node.kubernetes.io/not-ready"]
        assert node["status"]["allocatable"]["cpu"] == "32"
    gpus = {n["metadata"]["name"]: n["status"]["allocatable"].get("nvidia.com/gpu") for n in nodes}
    assert gpus == {"kwok-node-0": "8", "kwok-node-1": None, "kwok-node-2": None}


def test_mpijob_crd_is_established(cluster: LocalCluster) -> None:
    if not MPIJOB_CRD.exists():
        return  # nothing installed; the MPIJob tests will say so
    crd = kubectl_json(cluster, "get", "crd", "mpijobs.kubeflow.org")
    assert condition(crd, "Established") == "True"


def test_job_pod_runs_then_succeeds_while_a_bare_pod_keeps_running(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, pod("worker"), job("launcher", annotations={"test.mpijob/run-for": "3s"}))

    running = wait_for(lambda: [p for p in job_pods(cluster, namespace, "launcher")
                                if p["status"].get("phase") == "Running"], TIMEOUT, what="the Job's pod Running")
    assert running[0]["status"]["podIP"].startswith("10.244.")
    assert condition(running[0], "Ready") == "True"
    wait_for(lambda: condition(kubectl_json(cluster, "-n", namespace, "get", "job", "launcher"), "Complete") == "True",
             TIMEOUT, what="the Job Complete")
    [finished] = job_pods(cluster, namespace, "launcher")
    assert finished["status"]["phase"] == "Succeeded"
    assert finished["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0

    # The bare pod started before the Job and is still Running after the Job completed.
    worker = kubectl_json(cluster, "-n", namespace, "get", "pod", "worker")
    assert worker["status"]["phase"] == "Running"
    assert condition(worker, "Ready") == "True"
    assert "running" in worker["status"]["containerStatuses"][0]["state"]


def test_failing_job_pod_carries_the_chosen_exit_code_and_reason(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, job("launcher", labels={"test.mpijob/outcome": "fail"},
                                  annotations={"test.mpijob/exit-code": "3", "test.mpijob/reason": "OOMKilled"}))

    wait_for(lambda: condition(kubectl_json(cluster, "-n", namespace, "get", "job", "launcher"), "Failed") == "True",
             TIMEOUT, what="the Job Failed")
    [failed] = job_pods(cluster, namespace, "launcher")
    assert failed["status"]["phase"] == "Failed"
    terminated = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "OOMKilled")


def test_failing_pod_can_look_evicted(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, pod("worker", labels={"test.mpijob/outcome": "fail"},
                                  annotations={"test.mpijob/pod-reason": "Evicted",
                                               "test.mpijob/pod-message": "The node was low on memory."}))

    wait_for(lambda: phase_of(cluster, namespace, "worker") == "Failed", TIMEOUT, what="the pod Failed")
    status = kubectl_json(cluster, "-n", namespace, "get", "pod", "worker")["status"]
    assert (status["reason"], status["message"]) == ("Evicted", "The node was low on memory.")
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1


def test_background_deletion_of_a_job_removes_its_pods(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, job("launcher", labels={"test.mpijob/outcome": "hang"}))
    wait_for(lambda: [p for p in job_pods(cluster, namespace, "launcher") if p["status"].get("phase") == "Running"],
             TIMEOUT, what="the Job's pod Running")

    cluster.kubectl("-n", namespace, "delete", "job", "launcher", "--cascade=background", "--wait=false", check=True)
    wait_for(lambda: not job_pods(cluster, namespace, "launcher"), TIMEOUT,
             what="the garbage collector to remove the pod")


def test_gpu_pod_schedules_on_the_gpu_node(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, pod("trainer", resources={"nvidia.com/gpu": "2"}))

    wait_for(lambda: phase_of(cluster, namespace, "trainer") == "Running", TIMEOUT, what="the GPU pod Running")
    assert kubectl_json(cluster, "-n", namespace, "get", "pod", "trainer")["spec"]["nodeName"] == "kwok-node-0"
