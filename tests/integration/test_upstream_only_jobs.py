"""Jobs that only upstream's rules accept run to completion where our webhook is not called.

The shipped webhook configurations leave out the ``kube-system`` and ``mpi-operator`` namespaces, so
MPIJobs there are stored as written, and jobs created under the Go operator before a handover never met
our webhook either. The reconciler judges stored jobs by upstream's rules only: such jobs must run as
upstream runs them, not be frozen by our stricter admission rules.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import CONTAINER, JSON, mpijob
from hack.devcluster.rest import ApiError
from tests.integration.mpijobs import Jobs
from tests.integration.operator_fixtures import ReconcilerControl

UNWATCHED = "kube-system"  # left out by the webhook configurations' namespaceSelector


LABEL = {"test.mpijob/upstream-only": "true"}


def labelled(job: JSON) -> JSON:
    job["metadata"]["labels"] = dict(LABEL)
    return job


@pytest.fixture
def jobs(cluster: LocalCluster, reconciler: ReconcilerControl) -> Iterator[Jobs]:
    """Jobs in a namespace our webhook leaves out; those a test created are deleted after it."""
    jobs = Jobs(cluster, UNWATCHED)
    try:
        yield jobs
    finally:
        selector = "?labelSelector=test.mpijob/upstream-only%3Dtrue"
        names = [j["metadata"]["name"] for j in cluster.rest.get(
            jobs.path("mpijobs", group="kubeflow.org/v2beta1") + selector)["items"]]
        for name in names:
            jobs.delete(name)
        for name in names:
            jobs.wait_gone("mpijobs", name, "kubeflow.org/v2beta1")


def test_our_webhook_denies_what_is_stored_there(jobs: Jobs, namespace: str) -> None:
    """The premise: the same job is denied in any other namespace, and stored as written in this one."""
    job = mpijob("premise", 1, launcherCreationPolicy="waitForWorkersReady")
    with pytest.raises(ApiError) as denied:
        Jobs(jobs.cluster, namespace).create(copy.deepcopy(job))
    assert denied.value.status == 422
    causes = json.loads(denied.value.body)["details"]["causes"]
    assert [(cause["reason"], cause["field"]) for cause in causes] == [
        ("FieldValueNotSupported", "spec.launcherCreationPolicy")]
    stored = jobs.create(labelled(job))
    assert stored["spec"]["launcherCreationPolicy"] == "waitForWorkersReady"


def test_an_unknown_launcher_creation_policy_waits_for_the_workers(jobs: Jobs) -> None:
    """Upstream creates the launcher at start-up only for exactly ``AtStartup``: any other value waits."""
    name = f"policy-{uuid.uuid4().hex[:6]}"
    jobs.create(labelled(mpijob(name, 2, launcherCreationPolicy="waitForWorkersReady")))
    workers = jobs.wait_workers(name, 2, "Running")
    launcher = jobs.wait_launcher(name)
    ready_times = [next(c["lastTransitionTime"] for c in p["status"]["conditions"] if c["type"] == "Ready")
                   for p in workers]
    assert launcher["metadata"]["creationTimestamp"] >= max(ready_times)
    jobs.wait_condition(name, "Succeeded", timeout=90)
    jobs.wait_workers(name, 0)  # cleanPodPolicy Running: the workers are released
    assert [e["reason"] for e in jobs.events(name)] == ["MPIJobCreated", "MPIJobRunning", "MPIJobSucceeded"]


def test_an_extra_replica_spec_key_is_ignored(jobs: Jobs) -> None:
    """Upstream reads only ``Launcher`` and ``Worker``; a misspelt ``worker`` key creates no pods."""
    name = f"extra-{uuid.uuid4().hex[:6]}"
    job = mpijob(name, 1)
    job["spec"]["mpiReplicaSpecs"]["worker"] = {"replicas": 3, "template": {"spec": {"containers": [CONTAINER]}}}
    jobs.create(labelled(job))
    jobs.wait_condition(name, "Succeeded", timeout=90)
    status = jobs.get(name)["status"]
    assert status["replicaStatuses"] == {"Launcher": {"succeeded": 1}, "Worker": {}}
    jobs.wait_workers(name, 0)
    assert [p["metadata"]["name"] for p in jobs.pods(f"training.kubeflow.org/job-name={name}")
            if "worker" in p["metadata"]["name"] and not p["metadata"].get("deletionTimestamp")] == []
