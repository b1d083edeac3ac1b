"""What the reconciler stores is exactly what the builders produce, and children that drift converge (issue 7).

Stored worker Pods and launcher Jobs are compared whole with ``build_worker``/``build_launcher_job`` of
the stored MPIJob, after ``without_server_fields`` removed what the API server sets itself (identity,
timestamps, managedFields, status, and the defaults it fills into fields we leave unset). A default is
removed only where the built object leaves the field unset and only when it has its default value, so
the comparison is exact on every field we set.
"""

from __future__ import annotations

import base64
import copy
import json

import pytest

from hack.devcluster import LocalCluster
from hack.devcluster.audit import audit_events, resource_of
from hack.devcluster.mpijobs import JSON, mpijob
from hack.devcluster.rest import ApiError
from hack.devcluster.wait import wait_for
from reconciler.mpijob import builders
from shared.api import MPIJob
from shared.api.config_map_size import largest_fitting_workers
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl
from tests.unit.helpers import with_defaults

HANG = {"test.mpijob/outcome": "hang"}
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")
POD_SPEC_DEFAULTS: JSON = {
    "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler", "securityContext": {},
    "terminationGracePeriodSeconds": 30,
}
POD_ADMISSION_DEFAULTS: JSON = {  # set on Pods (not on templates) by admission plugins and the scheduler
    "serviceAccountName": "default", "serviceAccount": "default", "priority": 0, "enableServiceLinks": True,
    "preemptionPolicy": "PreemptLowerPriority",
}
DEFAULT_TOLERATIONS = [  # the DefaultTolerationSeconds admission plugin
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]
CONTAINER_DEFAULTS: JSON = {"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                            "resources": {}}
JOB_SPEC_DEFAULTS: JSON = {"parallelism": 1, "completions": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
                           "suspend": False, "manualSelector": False}
SERVICE_ACCOUNT_VOLUME = "kube-api-access-"
JOB_CONTROLLER_LABELS = ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name", "controller-uid",
                         "job-name")


def _drop_defaults(stored: JSON, desired: JSON, defaults: JSON) -> None:
    for key, value in defaults.items():
        if key not in desired and stored.get(key) == value:
            del stored[key]


def _pull_policy(image: str) -> str:
    """The API server's default imagePullPolicy: Always for an untagged or :latest image."""
    tag = image.rsplit("/", 1)[-1].partition(":")[2] if "@" not in image else "digest"
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _strip_pod_spec(stored: JSON, desired: JSON, *, is_pod: bool) -> None:
    _drop_defaults(stored, desired, POD_SPEC_DEFAULTS)
    if is_pod:
        _drop_defaults(stored, desired, POD_ADMISSION_DEFAULTS)
        if "nodeName" not in desired:
            stored.pop("nodeName", None)
        if "tolerations" in stored:
            stored["tolerations"] = [t for t in stored["tolerations"]
                                     if t not in DEFAULT_TOLERATIONS or t in desired.get("tolerations", [])]
            if not stored["tolerations"] and "tolerations" not in desired:
                del stored["tolerations"]
    stored["volumes"] = [v for v in stored.get("volumes", []) if not v["name"].startswith(SERVICE_ACCOUNT_VOLUME)]
    if not stored["volumes"] and "volumes" not in desired:
        del stored["volumes"]
    for volume, wanted in zip(stored.get("volumes", []), desired.get("volumes", []), strict=False):
        for source in ("secret", "configMap"):
            if source in volume and "defaultMode" not in wanted.get(source, {}):
                _drop_defaults(volume[source], wanted.get(source, {}), {"defaultMode": 0o644})
    for kind in ("initContainers", "containers"):
        for container, wanted in zip(stored.get(kind, []), desired.get(kind, []), strict=False):
            _drop_defaults(container, wanted, {**CONTAINER_DEFAULTS,
                                               "imagePullPolicy": _pull_policy(str(container.get("image", "")))})
            mounts = [m for m in container.get("volumeMounts", []) if not m["name"].startswith(SERVICE_ACCOUNT_VOLUME)]
            if mounts or "volumeMounts" in wanted:
                container["volumeMounts"] = mounts
            else:
                container.pop("volumeMounts", None)


def without_server_fields(stored: JSON, desired: JSON) -> JSON:
    """``stored`` without what the API server (and its admission plugins, the scheduler, the Job controller)
    set, where ``desired`` leaves it unset. The input is not changed."""
    out = copy.deepcopy(stored)
    out.pop("status", None)
    for key in SERVER_METADATA:
        out["metadata"].pop(key, None)
    if desired["kind"] == "Pod":
        _strip_pod_spec(out["spec"], desired["spec"], is_pod=True)
    elif desired["kind"] == "Job":
        spec, wanted = out["spec"], desired["spec"]
        _drop_defaults(spec, wanted, JOB_SPEC_DEFAULTS)
        if "selector" not in wanted:
            spec.pop("selector", None)
        template, wanted_template = spec["template"], wanted["template"]
        labels = template["metadata"].get("labels", {})
        for key in JOB_CONTROLLER_LABELS:
            if key not in wanted_template["metadata"].get("labels", {}):
                labels.pop(key, None)
        if template["metadata"].get("creationTimestamp", "") is None:
            del template["metadata"]["creationTimestamp"]
        _strip_pod_spec(template["spec"], wanted_template["spec"], is_pod=False)
    return out


def built_from(stored_job: JSON) -> MPIJob:
    """The stored MPIJob as the reconciler sees it: parsed and defaulted."""
    return with_defaults(MPIJob.model_validate(stored_job))


@pytest.fixture
def jobs(cluster: LocalCluster, namespace: str, reconciler: ReconcilerControl) -> Jobs:
    return Jobs(cluster, namespace)


@pytest.mark.parametrize("implementation", ["OpenMPI", "Intel", "MPICH"])
def test_stored_worker_and_launcher_are_exactly_what_the_builders_produce(jobs: Jobs, implementation: str) -> None:
    spec = mpijob("pi", 2, launcher_labels=HANG, mpiImplementation=implementation)
    worker_template = spec["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    worker_template["metadata"] = {"labels": {"team": "a"}, "annotations": {"note": "kept"}}
    worker_template["spec"]["containers"][0].update(
        env=[{"name": "FOO", "value": "bar"}], resources={"requests": {"cpu": "100m"}})
    jobs.create(spec)
    launcher = jobs.wait_launcher("pi")
    jobs.wait_workers("pi", 2)
    job = built_from(jobs.get("pi"))
    for index in range(2):
        desired = builders.build_worker(job, index)
        assert without_server_fields(jobs.must("pods", f"pi-worker-{index}"), desired) == desired
    desired_launcher = builders.build_launcher_job(job)
    assert without_server_fields(launcher, desired_launcher) == desired_launcher


def _reconciler_writes(cluster: LocalCluster, offset: int, resource: str, name: str) -> list[str]:
    """The verbs of the reconciler's writes to one object, from the audit log after byte ``offset``."""
    assert cluster.audit_log is not None
    return [event["verb"] for event in audit_events(cluster.audit_log, offset=offset)
            if event.get("stage") == "ResponseComplete" and resource_of(event) == resource
            and (event.get("objectRef") or {}).get("name") == name
            and str(event.get("userAgent", "")).startswith("mpi-operator")
            and event["verb"] in ("create", "update", "patch", "delete")]


def test_drifted_secret_and_service_converge_in_one_write_each(jobs: Jobs, cluster: LocalCluster,
                                                               reconciler: ReconcilerControl) -> None:
    jobs.create(mpijob("pi", 1, launcher_labels=HANG))
    jobs.wait_condition("pi", "Running")
    secret = jobs.must("secrets", "pi-ssh")
    service = jobs.must("services", "pi")
    assert cluster.audit_log is not None
    offset = cluster.audit_log.stat().st_size
    extra = base64.b64encode(b"someone else's").decode()
    cluster.rest.merge_patch(jobs.path("secrets", "pi-ssh"), {"data": {"extra": extra}})
    cluster.rest.merge_patch(jobs.path("services", "pi"), {"spec": {"selector": {"extra": "selects-nothing"}}})
    wait_for(lambda: jobs.must("secrets", "pi-ssh")["data"] == secret["data"], timeout=30,
             what="the Secret without the extra key")
    wait_for(lambda: jobs.must("services", "pi")["spec"]["selector"] == service["spec"]["selector"], timeout=30,
             what="the Service selector without the extra key")
    # three later syncs (each after a change of the MPIJob's annotations; the caches keep no pod annotations,
    # so a pod's would not reach the sync) find nothing left to write
    def synced() -> int:
        return reconciler.process.log_count(f"msg=sync key={jobs.ns}/pi ")

    for round_ in range(3):
        before = synced()
        jobs.patch("pi", {"metadata": {"annotations": {"test.mpijob/round": str(round_)}}})
        wait_for(lambda before=before: synced() > before, timeout=30,  # type: ignore[misc]
                 what=f"the sync after annotation round {round_}")
    assert _reconciler_writes(cluster, offset, "secrets", "pi-ssh") == ["patch"]
    assert _reconciler_writes(cluster, offset, "services", "pi") == ["patch"]
    assert jobs.must("secrets", "pi-ssh")["data"] == secret["data"], "the key pair of a running job never rotates"


def test_a_hostfile_too_large_for_a_config_map_is_refused_at_admission_and_at_sync(jobs: Jobs) -> None:
    """The webhook refuses it at create; one it never saw (``kube-system``, which its namespaceSelector leaves
    out) the reconciler refuses at sync time, before anything is created."""
    huge = mpijob("huge", 30_000)
    model = MPIJob.model_validate({**huge, "metadata": {"name": "huge", "namespace": jobs.ns}})
    with pytest.raises(ApiError) as denied:
        jobs.create(copy.deepcopy(huge))
    assert denied.value.status == 422
    [cause] = json.loads(denied.value.body)["details"]["causes"]
    assert cause["field"] == "spec.mpiReplicaSpecs[Worker].replicas"
    assert cause["message"].endswith(
        f"a ConfigMap can hold; at most {largest_fitting_workers(model)} workers fit with these names")
    unwatched = Jobs(jobs.cluster, "kube-system")
    name = f"huge-{jobs.ns[-6:]}"
    unwatched.create({**huge, "metadata": {"name": name}})
    try:
        fits = largest_fitting_workers(MPIJob.model_validate(unwatched.get(name)))
        failed = unwatched.wait_condition(name, "Failed", timeout=60)
        assert failed["reason"] == "ValidationError"
        assert failed["message"].startswith(
            "Found validation errors: spec.mpiReplicaSpecs[Worker].replicas: Invalid value: 30000: the hostfile and "
            f'discover_hosts.sh of ConfigMap "{name}-config" would need ')
        assert failed["message"].endswith(
            f"bytes, more than the 1048576 bytes a ConfigMap can hold; at most {fits} workers fit with these names")
        event = until(lambda: next((e for e in unwatched.events(name) if e["reason"] == "ValidationError"), None),
                      timeout=30, what="the ValidationError event")
        assert (event["type"], event["message"]) == ("Warning", failed["message"])
        assert unwatched.get(name)["status"]["completionTime"]
        for plural, child, group in ((("services", name, ""), ("configmaps", f"{name}-config", ""),
                                      ("secrets", f"{name}-ssh", ""), ("jobs", f"{name}-launcher", "batch/v1"))):
            assert unwatched.object(plural, child, group) is None, f"{plural}/{child} was created"
        assert unwatched.workers(name) == []
    finally:
        unwatched.delete(name)
        unwatched.wait_gone("mpijobs", name, "kubeflow.org/v2beta1")
