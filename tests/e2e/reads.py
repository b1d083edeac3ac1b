"""What upstream users rely on, checked in a state of the operator (design rule 9: nothing of it may depend on a
component of ours being up): `kubectl get/describe/delete` of an MPIJob, the garbage collector deleting what a
deleted job owns, and the namespace controller deleting a namespace that holds a job.

    planted = plant(cluster, "crd-alone")   # while MPIJobs can still be created (the webhook up, or none registered)
    ...                                     # the state: operator removed, webhook scaled to zero, Go operator, ...
    check_reads(cluster, planted)           # everything above works; the namespace is gone afterwards

The jobs are suspended and managed by MultiKueue: no operator acts on them, so what is checked is the API server,
the garbage collector and the namespace controller alone.
"""

from __future__ import annotations

import json
import uuid

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import create_owning_a_config_map, is_gone
from hack.devcluster.wait import wait_for

NAMES = ("kept", "deleted")


def plant(cluster: LocalCluster, state: str) -> str:
    """A new namespace holding two MPIJobs, each owning a ConfigMap (controller, blockOwnerDeletion); its name."""
    namespace = f"reads-{state}-{uuid.uuid4().hex[:5]}"
    cluster.rest.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": namespace}})
    for name in NAMES:
        create_owning_a_config_map(cluster, namespace, name)
    return namespace


def check_reads(cluster: LocalCluster, namespace: str, timeout: float = 120) -> None:
    """kubectl get, describe and delete of the jobs `plant` made, the garbage collector deleting the deleted job's
    ConfigMap, then the namespace deleted by the namespace controller, within TIMEOUT seconds each."""
    def kubectl(*args: str) -> str:
        result = cluster.kubectl("-n", namespace, *args, timeout=timeout)
        assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
        return result.stdout

    read = json.loads(kubectl("get", "mpijob", "kept", "-o", "json"))
    assert (read["apiVersion"], read["metadata"]["name"]) == ("kubeflow.org/v2beta1", "kept")
    assert kubectl("get", "mpijobs", "-o", "name").split() == [f"mpijob.kubeflow.org/{n}" for n in sorted(NAMES)]
    assert kubectl("describe", "mpijob", "kept").startswith("Name:         kept\n")
    kubectl("delete", "mpijob", "deleted", f"--timeout={int(timeout)}s")
    wait_for(lambda: is_gone(cluster, f"/api/v1/namespaces/{namespace}/configmaps/deleted-config"), timeout, 0.5,
             what="the garbage collector deleting what the deleted MPIJob owned")
    assert not is_gone(cluster, f"/api/v1/namespaces/{namespace}/configmaps/kept-config")
    cluster.rest.request("DELETE", f"/api/v1/namespaces/{namespace}")
    wait_for(lambda: is_gone(cluster, f"/api/v1/namespaces/{namespace}"), timeout, 0.5,
             what=f"the namespace {namespace}, which held an MPIJob, deleted")
