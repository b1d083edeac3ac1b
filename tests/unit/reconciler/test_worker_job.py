"""The IndexedJob worker backend's pure parts: the worker Job, whole, and which backend a job's workers run on."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reconciler.mpijob import builders
from reconciler.mpijob.builders import GangScheduling
from reconciler.mpijob.builders.worker_job import format_indexes
from reconciler.mpijob.caches import Caches, slim_job, slim_pod, slim_service
from reconciler.mpijob.worker_backends import chosen_worker_backend, with_backend_label
from shared.jsondict import JSONDict
from tests.unit.reconciler.helpers import make_job, owner_ref, replica, vandalize

WORKER_LABELS = {"training.kubeflow.org/operator-name": "mpi-operator", "training.kubeflow.org/job-name": "foo",
                 "training.kubeflow.org/job-role": "worker", "mpijobs.kubeflow.org/worker-job": "foo"}
SSH_VOLUME = {"name": "ssh-auth", "secret": {"secretName": "foo-ssh", "defaultMode": 384, "items": [
    {"key": "ssh-privatekey", "path": "id_rsa"}, {"key": "ssh-publickey", "path": "id_rsa.pub"},
    {"key": "ssh-publickey", "path": "authorized_keys"}]}}


def _job(workers: int = 3, worker_template: JSONDict | None = None, **spec: Any) -> Any:
    worker = replica(worker_template or {"containers": [{"name": "w", "image": "img"}]}, replicas=workers)
    return make_job(mpiReplicaSpecs={"Launcher": replica(replicas=1), "Worker": worker}, **spec)


def test_the_worker_job_whole() -> None:
    template = {"metadata": {"labels": {"team": "a"}, "annotations": {"note": "kept"}},
                "spec": {"hostname": "ignored", "containers": [{"name": "w", "image": "img"}]}}
    job = make_job(mpiReplicaSpecs={"Launcher": replica(replicas=1),
                                    "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": template}})
    assert builders.build_worker_job(job, cluster_domain="example.org") == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "foo-worker", "namespace": "bar", "labels": {"app": "foo"},
                     "ownerReferences": [owner_ref("foo")]},
        "spec": {
            "completionMode": "Indexed",
            "completions": 3,
            "parallelism": 3,
            "backoffLimit": 2147483647,
            "podReplacementPolicy": "Failed",
            "template": {
                "metadata": {"labels": {"team": "a", **WORKER_LABELS}, "annotations": {"note": "kept"}},
                "spec": {
                    "containers": [{"name": "w", "image": "img", "command": ["/usr/sbin/sshd", "-De"],
                                    "env": [{"name": "K_MPI_JOB_ROLE", "value": "worker"}],
                                    "volumeMounts": [{"name": "ssh-auth", "mountPath": "/root/.ssh"}]}],
                    "subdomain": "foo",
                    "dnsConfig": {"searches": ["foo.bar.svc.example.org"]},
                    "restartPolicy": "OnFailure",
                    "volumes": [SSH_VOLUME],
                },
            },
        },
    }


def test_the_template_is_a_worker_pod_without_what_is_per_index() -> None:
    """Every field of ``build_worker``'s pod but the hostname (the Job controller's) and the replica-index label
    (the pod webhook's); the worker-Job label the webhook selects on instead."""
    job = _job(4, {"hostNetwork": True, "containers": [{"name": "w", "image": "img"}]})
    pod = builders.build_worker(job, 2, GangScheduling("volcano"))
    template = builders.build_worker_job_template(job, GangScheduling("volcano"))
    del pod["spec"]["hostname"]
    del pod["metadata"]["labels"]["training.kubeflow.org/replica-index"]
    assert template["spec"] == pod["spec"]
    assert template["metadata"]["labels"] == {**pod["metadata"]["labels"], "mpijobs.kubeflow.org/worker-job": "foo"}
    assert template["metadata"]["annotations"] == pod["metadata"]["annotations"] == {
        "scheduling.k8s.io/group-name": "foo"}


@pytest.mark.parametrize(("gang", "labels", "annotations", "extra_spec"), [
    pytest.param("volcano", {}, {"scheduling.k8s.io/group-name": "foo"}, {"schedulerName": "volcano"}, id="volcano"),
    pytest.param("scheduler-plugins-scheduler", {"scheduling.x-k8s.io/pod-group": "foo"}, {},
                 {"schedulerName": "scheduler-plugins-scheduler"}, id="scheduler-plugins"),
    pytest.param("kube-scheduler", {}, {}, {"schedulingGroup": {"podGroupName": "foo"}}, id="native"),
])
def test_the_template_carries_the_gang(gang: str, labels: dict[str, str], annotations: dict[str, str],
                                       extra_spec: JSONDict) -> None:
    template = builders.build_worker_job_template(_job(), GangScheduling(gang))
    assert template["metadata"]["labels"] == {**WORKER_LABELS, **labels}
    assert template["metadata"].get("annotations", {}) == annotations
    plain = builders.build_worker_job_template(_job())["spec"]
    assert template["spec"] == {**plain, **extra_spec}


def test_under_run_launcher_as_worker_the_pod_webhook_adds_one_to_the_index() -> None:
    template = builders.build_worker_job_template(_job(runLauncherAsWorker=True))
    assert template["metadata"]["annotations"] == {"mpijobs.kubeflow.org/replica-index-offset": "1"}
    assert "annotations" not in builders.build_worker_job_template(_job())["metadata"]


def test_the_builder_shares_nothing_with_the_job() -> None:
    job = _job()
    before = job.model_dump(by_alias=True, exclude_none=True)
    vandalize(builders.build_worker_job(job))
    assert job.model_dump(by_alias=True, exclude_none=True) == before


@pytest.mark.parametrize(("spec", "replicas", "patch"), [
    pytest.param({"parallelism": 4, "completions": 4}, 4, None, id="same-size"),
    pytest.param({"parallelism": 4, "completions": 4}, 6, {"spec": {"parallelism": 6, "completions": 6}}, id="up"),
    pytest.param({"parallelism": 4, "completions": 4}, 3, {"spec": {"parallelism": 3, "completions": 3}}, id="down"),
    pytest.param({"parallelism": 3, "completions": 4}, 4, {"spec": {"parallelism": 4, "completions": 4}},
                 id="half-done"),
])
def test_a_scale_patches_parallelism_and_completions_together(spec: JSONDict, replicas: int,
                                                              patch: JSONDict | None) -> None:
    assert builders.worker_job_scale_patch({"spec": spec}, replicas) == patch


# ---- which backend a job's workers run on

UID = "foo-uid"
STORED = {"metadata": {"name": "foo", "namespace": "bar", "uid": UID}}
INDEXED = {"metadata": {**STORED["metadata"], "annotations": {"mpijobs.kubeflow.org/worker-backend": "IndexedJob"}}}
PODS = {"metadata": {**STORED["metadata"], "annotations": {"mpijobs.kubeflow.org/worker-backend": "Pods"}}}


def _caches(*objects: JSONDict) -> Caches:
    caches = Caches()
    for obj in objects:
        kind = obj["kind"]
        slim = {"Job": slim_job, "Pod": slim_pod, "Service": slim_service}[kind](copy.deepcopy(obj))
        assert slim is not None
        {"Job": caches.jobs, "Pod": caches.pods, "Service": caches.services}[kind].put(slim)
    return caches


def _worker_job(owner: str = UID) -> JSONDict:
    job = builders.build_worker_job(_job())
    job["metadata"]["ownerReferences"][0]["uid"] = owner
    return job


def _worker_pod(owner: str = UID) -> JSONDict:
    pod = builders.build_worker(_job(), 0)
    pod["metadata"]["ownerReferences"][0]["uid"] = owner
    return pod


def _service(backend: str) -> JSONDict:
    return with_backend_label(builders.build_service(_job()), backend)


@pytest.mark.parametrize(("stored", "objects", "default", "backend"), [
    pytest.param(STORED, [], "Pods", "Pods", id="new-job-default-pods"),
    pytest.param(STORED, [], "IndexedJob", "IndexedJob", id="new-job-default-indexed"),
    pytest.param(INDEXED, [], "Pods", "IndexedJob", id="new-job-annotated-indexed"),
    pytest.param(PODS, [], "IndexedJob", "Pods", id="new-job-annotated-pods"),
    pytest.param(STORED, [_worker_job()], "Pods", "IndexedJob", id="worker-job-beats-the-flag"),
    pytest.param(PODS, [_worker_job()], "Pods", "IndexedJob", id="worker-job-beats-the-annotation"),
    pytest.param(STORED, [_worker_pod()], "IndexedJob", "Pods", id="worker-pods-beat-the-flag"),
    pytest.param(INDEXED, [_worker_pod()], "IndexedJob", "Pods", id="worker-pods-beat-the-annotation"),
    pytest.param(STORED, [_service("Pods")], "IndexedJob", "Pods", id="suspended-pods-job-keeps-pods"),
    pytest.param(STORED, [_service("IndexedJob")], "Pods", "IndexedJob", id="suspended-indexed-job-keeps-it"),
    pytest.param(STORED, [_worker_job("another-uid"), _worker_pod("another-uid")], "IndexedJob", "IndexedJob",
                 id="a-predecessors-objects-do-not-count"),
])
def test_a_job_keeps_the_backend_its_objects_were_made_with(stored: JSONDict, objects: list[JSONDict], default: str,
                                                            backend: str) -> None:
    assert chosen_worker_backend(stored, _caches(*objects), default) == backend


def test_only_an_indexed_job_s_service_is_labelled() -> None:
    service = builders.build_service(_job())
    assert with_backend_label(service, "Pods") is service
    labelled = with_backend_label(service, "IndexedJob")
    assert labelled == {**service, "metadata": {**service["metadata"], "labels": {
        "app": "foo", "mpijobs.kubeflow.org/worker-backend": "IndexedJob"}}}
    assert service["metadata"]["labels"] == {"app": "foo"}, "the built Service is not changed"


def test_the_cache_keeps_a_worker_job_s_size_and_its_pods_index_and_hostname() -> None:
    worker_job = {**_worker_job(), "status": {"active": 2, "succeeded": 1, "completedIndexes": "1",
                                              "uncountedTerminatedPods": {}}}
    assert slim_job(copy.deepcopy(worker_job)) == {
        "kind": "Job", "metadata": worker_job["metadata"],
        "status": {"active": 2, "succeeded": 1, "completedIndexes": "1"},
        "spec": {"suspend": False, "completionMode": "Indexed", "parallelism": 3, "completions": 3}}
    launcher = builders.build_launcher_job(_job())
    assert slim_job(launcher)["spec"] == {"suspend": False}, "a launcher's as before"  # type: ignore[index]
    labels = builders.build_worker_job_template(_job())["metadata"]["labels"]
    pod = {"metadata": {"name": "foo-worker-2-x7k2p", "namespace": "bar", "labels": {
        **labels, "batch.kubernetes.io/job-completion-index": "2"},
        "ownerReferences": [{"kind": "Job", "name": "foo-worker", "uid": "j", "controller": True}]},
        "spec": {"hostname": "foo-worker-2", "containers": []}, "status": {"phase": "Running"}}
    slim = slim_pod(pod)
    assert slim is not None
    assert slim["spec"] == {"hostname": "foo-worker-2"}
    assert slim["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "2"
    plain = slim_pod({**builders.build_worker(_job(), 2), "status": {"phase": "Running"}})
    assert plain is not None
    assert "spec" not in plain, "a plain worker's slim pod is as before"


@pytest.mark.parametrize(("text", "indexes", "written"), [
    pytest.param(None, set(), "", id="none"),
    pytest.param("", set(), "", id="empty"),
    pytest.param("3", {3}, "3", id="one"),
    pytest.param("1,2", {1, 2}, "1,2", id="a-run-of-two-is-two-indexes"),
    pytest.param("0,2-4,7,9-10", {0, 2, 3, 4, 7, 9, 10}, "0,2-4,7,9,10", id="runs"),
    pytest.param("1,x,3-", {1}, "1", id="malformed-parts-skipped"),
])
def test_completed_indexes_are_read_and_written_as_the_job_controller_does(text: object, indexes: set[int],
                                                                            written: str) -> None:
    assert builders.parse_indexes(text) == indexes
    assert format_indexes(indexes) == written


@pytest.mark.parametrize(("status", "lost", "expected"), [
    pytest.param({"active": 3, "succeeded": 1, "completedIndexes": "1"}, {1},
                 {"active": 3, "succeeded": 0, "completedIndexes": ""}, id="the-only-one"),
    pytest.param({"succeeded": 4, "completedIndexes": "0,2-4"}, {3, 5},
                 {"succeeded": 3, "completedIndexes": "0,2,4"}, id="from-a-run"),
    pytest.param({"succeeded": 1, "completedIndexes": "2"}, {1}, None, id="not-listed"),
    pytest.param({"active": 2}, {1}, None, id="none-completed"),
])
def test_a_lost_index_leaves_the_completed_ones(status: JSONDict, lost: set[int], expected: JSONDict | None) -> None:
    assert builders.without_completed_indexes(status, lost) == expected
