"""Gang scheduling: upstream's podgroup_test.go (controller.md 6.2), every case; whole objects where it builds one."""

from __future__ import annotations

import pytest

from reconciler.mpijob.builders import (
    GangScheduling,
    build_native_pod_group,
    build_pod_group,
    build_scheduler_plugins_pod_group,
    build_volcano_pod_group,
    build_workload,
    calc_priority_class_name,
    calculate_min_available,
    calculate_min_resources,
    decorate_pod_template,
    native_spec_differs,
    no_priority_classes,
    overridden_scheduler_name,
    pod_group_spec_update,
)
from reconciler.mpijob.builders.min_resources import ReplicaPriority, add_resources, sort_by_priority
from reconciler.mpijob.builders.quantity import parse_quantity
from shared.api import MPIJob
from shared.jsondict import JSONDict
from tests.unit.reconciler.helpers import make_job, owner_ref

QUEUE_ANNOTATION = {"scheduling.volcano.sh/queue-name": "project-x"}
GIVEN_MIN_RESOURCES = {"cpu": "100", "memory": "512Gi", "example.com/gpu": "40"}


def replica_with(replicas: int, *requests: tuple[str, str], priority_class: str | None = None) -> JSONDict:
    """A replica spec with one container per (cpu, memory) request pair."""
    spec: JSONDict = {"containers": [{"resources": {"requests": {"cpu": cpu, "memory": memory}}}
                                     for cpu, memory in requests]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"replicas": replicas, "template": {"spec": spec}}


def pg_job(run_policy: JSONDict | None = None, launcher_as_worker: bool | None = None,
           launcher_policy: str | None = None, **replicas: JSONDict) -> MPIJob:
    """A job as upstream's podgroup tests build it: name ``test``, the queue annotation, no defaulting."""
    spec: JSONDict = {"mpiReplicaSpecs": replicas}
    if launcher_policy is not None:
        spec["launcherCreationPolicy"] = launcher_policy
    if run_policy is not None:
        spec["runPolicy"] = run_policy
    if launcher_as_worker is not None:
        spec["runLauncherAsWorker"] = launcher_as_worker
    return make_job("test", "default", defaulted=False, annotations=QUEUE_ANNOTATION, **spec)


def pod_group(api_version: str, spec: JSONDict) -> JSONDict:
    return {"apiVersion": api_version, "kind": "PodGroup",
            "metadata": {"name": "test", "namespace": "default", "ownerReferences": [owner_ref("test")]},
            "spec": spec}


ALL_POLICY_FIELDS = {"schedulingPolicy": {"minAvailable": 2, "queue": "project-y", "priorityClass": "high",
                                          "minResources": {"cpu": 100, "memory": "512Gi", "example.com/gpu": 40},
                                          "scheduleTimeoutSeconds": 100}}
NO_WORKER_POLICY = {"schedulingPolicy": {"minAvailable": 1, "queue": "project-y", "priorityClass": "high",
                                         "scheduleTimeoutSeconds": 100}}

NEW_POD_GROUP = [
    pytest.param(
        pg_job(ALL_POLICY_FIELDS, Launcher=replica_with(1, ("1", "2Gi")), Worker=replica_with(1000, ("10", "20Gi"))),
        {"minMember": 2, "queue": "project-y", "priorityClassName": "high", "minResources": GIVEN_MIN_RESOURCES},
        {"minMember": 2, "minResources": GIVEN_MIN_RESOURCES, "scheduleTimeoutSeconds": 100},
        id="all schedulingPolicy fields are set",
    ),
    pytest.param(
        pg_job(Launcher=replica_with(1, ("1", "2Gi"), priority_class="high"), Worker=replica_with(2, ("10", "20Gi"))),
        {"minMember": 3, "queue": "project-x", "priorityClassName": "high",
         "minResources": {"cpu": "21", "memory": "42Gi"}},
        {"minMember": 3, "minResources": {"cpu": "21", "memory": "42Gi"}, "scheduleTimeoutSeconds": 0},
        id="schedulingPolicy is nil",
    ),
    pytest.param(
        pg_job(NO_WORKER_POLICY, launcher_as_worker=True, Launcher=replica_with(1, ("1", "2Gi"))),
        {"minMember": 1, "queue": "project-y", "priorityClassName": "high",
         "minResources": {"cpu": "1", "memory": "2Gi"}},
        {"minMember": 1, "minResources": {"cpu": "1", "memory": "2Gi"}, "scheduleTimeoutSeconds": 100},
        id="no worker no MinResources",
    ),
    pytest.param(
        pg_job(launcher_policy="WaitForWorkersReady", Launcher=replica_with(1, ("1", "2Gi"), priority_class="high"),
               Worker=replica_with(2, ("10", "20Gi"))),
        {"minMember": 2, "queue": "project-x", "priorityClassName": "high",
         "minResources": {"cpu": "20", "memory": "40Gi"}},
        {"minMember": 2, "minResources": {"cpu": "20", "memory": "40Gi"}, "scheduleTimeoutSeconds": 0},
        id="WaitForWorkersReady: the gang is the workers (mpi-operator#608)",
    ),
]


@pytest.mark.parametrize(("job", "volcano_spec", "scheduler_plugins_spec"), NEW_POD_GROUP)
def test_new_pod_group(job: MPIJob, volcano_spec: JSONDict, scheduler_plugins_spec: JSONDict) -> None:
    assert build_volcano_pod_group(job) == pod_group("scheduling.volcano.sh/v1beta1", volcano_spec)
    assert build_scheduler_plugins_pod_group(job) == pod_group("scheduling.x-k8s.io/v1alpha1", scheduler_plugins_spec)
    assert build_pod_group(job, GangScheduling("volcano")) == build_volcano_pod_group(job)
    assert build_pod_group(job, GangScheduling("default-scheduler")) == build_scheduler_plugins_pod_group(job)


def test_empty_fields_are_left_out() -> None:
    job = make_job("test", "default", defaulted=False, runPolicy={"schedulingPolicy": {"minAvailable": 0}},
                   mpiReplicaSpecs={"Launcher": replica_with(1, ("1", "1Gi"))})
    assert build_volcano_pod_group(job)["spec"] == {}
    assert build_scheduler_plugins_pod_group(job)["spec"] == {"scheduleTimeoutSeconds": 0}


def test_computed_empty_min_resources() -> None:
    """Go sends Volcano's pointer to an empty list as ``{}``; scheduler-plugins' empty map is left out."""
    job = pg_job(Launcher={"replicas": 1, "template": {"spec": {"containers": [{"name": "l"}]}}})
    assert build_volcano_pod_group(job)["spec"]["minResources"] == {}
    assert "minResources" not in build_scheduler_plugins_pod_group(job)["spec"]


@pytest.mark.parametrize(("job", "expected"), [
    pytest.param(pg_job({"schedulingPolicy": {"priorityClass": "high"}}, Launcher=replica_with(1),
                        Worker=replica_with(1, priority_class="low")), "high", id="schedulingPolicy.priorityClass"),
    pytest.param(pg_job(Launcher=replica_with(1, priority_class="high"), Worker=replica_with(1, priority_class="low")),
                 "high", id="launcher then worker"),
    pytest.param(pg_job(Launcher=replica_with(1), Worker=replica_with(1, priority_class="low")), "low",
                 id="worker only"),
    pytest.param(pg_job(Launcher=replica_with(1), Worker=replica_with(1)), "", id="none"),
])
def test_calc_priority_class_name(job: MPIJob, expected: str) -> None:
    assert calc_priority_class_name(job) == expected


@pytest.mark.parametrize(("gang", "expected"), [
    pytest.param(GangScheduling("volcano"),
                 {"metadata": {"annotations": {"scheduling.k8s.io/group-name": "test-mpijob"}},
                  "spec": {"schedulerName": "volcano"}}, id="volcano"),
    pytest.param(GangScheduling("default-scheduler"),
                 {"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "test-mpijob"}},
                  "spec": {"schedulerName": "default-scheduler"}}, id="scheduler-plugins"),
])
def test_decorate_pod_template_spec(gang: GangScheduling, expected: JSONDict) -> None:
    template: JSONDict = {}
    decorate_pod_template(template, "test-mpijob", gang)
    assert template == expected


def test_overridden_scheduler_name() -> None:
    gang = GangScheduling("volcano")
    assert overridden_scheduler_name({"spec": {"schedulerName": "volcano"}}, gang) is None
    assert overridden_scheduler_name({"spec": {"schedulerName": "other"}}, gang) == "other"
    assert overridden_scheduler_name({}, gang) == ""
    assert GangScheduling.from_flag("") is None
    assert GangScheduling.from_flag("volcano") == gang


PRIORITIES = {"high": 100010, "low": 10010}

MIN_RESOURCES = [
    pytest.param(pg_job({"schedulingPolicy": {"minResources": {"cpu": "100", "memory": "1000M"}}},
                        Launcher=replica_with(1, ("2", "1Gi"))), 3,
                 {"cpu": "100", "memory": "1G"}, id="minResources set: returned as is (canonical)"),
    pytest.param(pg_job(Launcher=replica_with(1, ("2", "1Gi"))), 0, None, id="minMember 0: nil"),
    pytest.param(pg_job(Launcher=replica_with(1, ("2", "1Gi")), Worker=replica_with(2, ("10", "32Gi"))), 3,
                 {"cpu": "22", "memory": "65Gi"}, id="volcano without priorityClass"),
    pytest.param(pg_job(launcher_as_worker=True, Launcher=replica_with(1, ("2", "1Gi"))), 1,
                 {"cpu": "2", "memory": "1Gi"}, id="without worker without priorityClass"),
    pytest.param(pg_job(Launcher=replica_with(1, ("2", "1Gi")),
                        Worker=replica_with(2, ("10", "32Gi"), ("50", "512Gi"))), None,
                 {"cpu": "122", "memory": "1089Gi"}, id="scheduler-plugins without priorityClass"),
    pytest.param(pg_job(Launcher=replica_with(1, ("2", "2Gi"), priority_class="non-existence"),
                        Worker=replica_with(2, ("5", "16Gi"), priority_class="non-existence")), 2,
                 {"cpu": "7", "memory": "18Gi"}, id="with non-existence priorityClass"),
    pytest.param(pg_job(Launcher=replica_with(1, ("2", "4Gi"), priority_class="high"),
                        Worker=replica_with(100, ("20", "64Gi"), priority_class="low")), 2,
                 {"cpu": "22", "memory": "68Gi"}, id="with existence priorityClass"),
    pytest.param(pg_job(Launcher=replica_with(1, ("2", "4Gi"), priority_class="low"),
                        Worker=replica_with(100, ("20", "64Gi"), priority_class="high")), 3,
                 {"cpu": "2004", "memory": "6408Gi"},
                 id="higher-priority workers: only the launcher is cut (to minMember-1, upstream quirk)"),
    pytest.param(pg_job(Launcher=replica_with(1, ("2", "1Gi")), Worker=replica_with(2, ("10", "32Gi")),
                        launcher_policy="WaitForWorkersReady"), 2,
                 {"cpu": "20", "memory": "64Gi"}, id="WaitForWorkersReady: the workers only"),
    pytest.param(pg_job(Launcher=replica_with(1, ("2", "1Gi"), priority_class="high"),
                        Worker=replica_with(4, ("10", "32Gi"), priority_class="low"),
                        launcher_policy="WaitForWorkersReady"), 3,
                 {"cpu": "30", "memory": "96Gi"}, id="WaitForWorkersReady: workers cut to minMember"),
    pytest.param(pg_job(Launcher=replica_with(1, ("2", "1Gi")), Worker=replica_with(2, ("10", "32Gi")),
                        launcher_policy="AtStartup"), 3,
                 {"cpu": "22", "memory": "65Gi"}, id="AtStartup: launcher and workers"),
]


@pytest.mark.parametrize(("job", "min_member", "expected"), MIN_RESOURCES)
def test_calculate_pg_min_resources(job: MPIJob, min_member: int | None, expected: dict[str, str] | None) -> None:
    assert calculate_min_resources(job, min_member, PRIORITIES.get) == expected


def test_priority_lookup_only_for_named_classes() -> None:
    asked: list[str] = []

    def lookup(name: str) -> int | None:
        asked.append(name)
        return None

    job = pg_job(Launcher=replica_with(1, ("1", "1Gi"), priority_class="p"), Worker=replica_with(1, ("1", "1Gi")))
    calculate_min_resources(job, 2, lookup)
    assert asked == ["p"]
    assert calculate_min_resources(job, 2, no_priority_classes) == {"cpu": "2", "memory": "2Gi"}


@pytest.mark.parametrize(("target", "resources", "expected"), [
    pytest.param(None, {"requests": {"cpu": "20"}}, None, id="nil target stays nil"),
    pytest.param({}, {"requests": {"cpu": "20"}}, {"cpu": "20"}, id="empty target"),
    pytest.param({"memory": "20Gi"}, {"requests": {"memory": "10Gi"}}, {"memory": "30Gi"}, id="sum"),
    pytest.param({}, {"requests": {"cpu": "10", "memory": "16Gi"},
                      "limits": {"example.com/gpu": "8", "cpu": "20", "memory": "32Gi"}},
                 {"example.com/gpu": "8", "cpu": "10", "memory": "16Gi"}, id="limits only where no request"),
])
def test_add_resources(target: dict[str, str] | None, resources: JSONDict, expected: dict[str, str] | None) -> None:
    totals = None if target is None else {name: parse_quantity(value) for name, value in target.items()}
    add_resources(totals, resources, 1)
    assert (None if totals is None else {name: str(q) for name, q in totals.items()}) == expected


@pytest.mark.parametrize(("job", "expected"), [
    pytest.param(make_job(runPolicy={"schedulingPolicy": {"minAvailable": 2}},
                          mpiReplicaSpecs={"Worker": {"replicas": 1000}}), 2, id="minAvailable set"),
    pytest.param(make_job(mpiReplicaSpecs={"Worker": {"replicas": 99}}), 100, id="workers + 1"),
    pytest.param(make_job(launcherCreationPolicy="AtStartup", mpiReplicaSpecs={"Worker": {"replicas": 4}}), 5,
                 id="AtStartup: workers + 1"),
    pytest.param(make_job(launcherCreationPolicy="WaitForWorkersReady", mpiReplicaSpecs={"Worker": {"replicas": 4}}),
                 4, id="WaitForWorkersReady: only the workers (mpi-operator#608)"),
    pytest.param(make_job(launcherCreationPolicy="WaitForWorkersReady", runLauncherAsWorker=True,
                          mpiReplicaSpecs={"Worker": {"replicas": 4}}), 4,
                 id="WaitForWorkersReady with runLauncherAsWorker: only the workers"),
    pytest.param(make_job(launcherCreationPolicy="WaitForWorkersReady", runLauncherAsWorker=True,
                          mpiReplicaSpecs={"Launcher": {"replicas": 1}}), 1,
                 id="WaitForWorkersReady without workers: the launcher"),
    pytest.param(make_job(launcherCreationPolicy="WaitForWorkersReady",
                          runPolicy={"schedulingPolicy": {"minAvailable": 7}},
                          mpiReplicaSpecs={"Worker": {"replicas": 4}}), 7, id="WaitForWorkersReady: minAvailable wins"),
])
def test_calculate_min_available(job: MPIJob, expected: int) -> None:
    assert calculate_min_available(job) == expected


def entry(replica_type: str, priority: int) -> ReplicaPriority:
    return ReplicaPriority(replica_type, priority, 1, [])


@pytest.mark.parametrize(("entries", "expected"), [
    pytest.param([entry("Launcher", 1), entry("Worker", 0)], ["Launcher", "Worker"], id="already ordered"),
    pytest.param([entry("Launcher", 0), entry("Worker", 1)], ["Worker", "Launcher"], id="reversed"),
    pytest.param([entry("Worker", 0), entry("Launcher", 0)], ["Worker", "Launcher"], id="equal priorities keep order"),
])
def test_replicas_order(entries: list[ReplicaPriority], expected: list[str]) -> None:
    assert [e.replica_type for e in sort_by_priority(entries)] == expected




PLUGINS_SPEC = {"minMember": 3, "minResources": {"cpu": "1500m", "memory": "1Gi"}, "scheduleTimeoutSeconds": 0}
VOLCANO_SPEC = {"minMember": 3, "queue": "q", "minResources": {}}


@pytest.mark.parametrize(("gang", "current", "desired", "expected"), [
    pytest.param(GangScheduling("s"), PLUGINS_SPEC, PLUGINS_SPEC, None, id="equal"),
    pytest.param(GangScheduling("s"), {**PLUGINS_SPEC, "minResources": {"cpu": "1.5", "memory": "1024Mi"}},
                 PLUGINS_SPEC, None, id="quantities equal by value"),
    pytest.param(GangScheduling("s"), {**PLUGINS_SPEC, "other": 1}, PLUGINS_SPEC, None, id="a field we do not own"),
    pytest.param(GangScheduling("volcano"), {"minMember": 3, "queue": "q", "priorityClassName": ""}, VOLCANO_SPEC,
                 None, id="absent and zero values are equal"),
    pytest.param(GangScheduling("s"), {**PLUGINS_SPEC, "minResources": {"cpu": "2"}, "other": 1}, PLUGINS_SPEC,
                 {**PLUGINS_SPEC, "other": 1}, id="changed: the fields we do not own are kept"),
    pytest.param(GangScheduling("volcano"), {**VOLCANO_SPEC, "priorityClassName": "high"}, VOLCANO_SPEC,
                 VOLCANO_SPEC, id="a field we no longer set is removed"),
    pytest.param(GangScheduling("s"), {**PLUGINS_SPEC, "minResources": {"cpu": "x"}}, PLUGINS_SPEC, PLUGINS_SPEC,
                 id="an unparsable quantity differs"),
])
def test_pod_group_spec_update(gang: GangScheduling, current: JSONDict, desired: JSONDict,
                               expected: JSONDict | None) -> None:
    assert pod_group_spec_update(current, desired, gang) == expected


NATIVE = GangScheduling("kube-scheduler")


@pytest.mark.parametrize(("job", "policy"), [
    pytest.param(pg_job(Launcher=replica_with(1, ("1", "1Gi")), Worker=replica_with(3, ("1", "1Gi"))),
                 {"gang": {"minCount": 4}}, id="AtStartup: workers + 1"),
    pytest.param(pg_job(launcher_policy="WaitForWorkersReady", Launcher=replica_with(1, ("1", "1Gi")),
                        Worker=replica_with(3, ("1", "1Gi"))), {"gang": {"minCount": 3}}, id="WaitForWorkersReady"),
    pytest.param(pg_job({"schedulingPolicy": {"minAvailable": 0}}, Launcher=replica_with(1, ("1", "1Gi"))),
                 {"basic": {}}, id="minAvailable 0: basic, minCount must be positive"),
])
def test_native_workload_and_pod_group(job: MPIJob, policy: JSONDict) -> None:
    meta = {"name": "test", "namespace": "default", "ownerReferences": [owner_ref("test")]}
    assert build_workload(job) == {
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload", "metadata": meta,
        "spec": {"controllerRef": {"apiGroup": "kubeflow.org", "kind": "MPIJob", "name": "test"},
                 "podGroupTemplates": [{"name": "mpijob", "schedulingPolicy": policy}]}}
    assert build_pod_group(job, NATIVE) == build_native_pod_group(job) == {
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": meta,
        "spec": {"podGroupTemplateRef": {"workload": {"workloadName": "test", "podGroupTemplateName": "mpijob"}},
                 "schedulingPolicy": policy}}


def test_native_decoration_keeps_the_scheduler_name() -> None:
    template: JSONDict = {"spec": {"schedulerName": "my-scheduler"}}
    decorate_pod_template(template, "test", NATIVE)
    assert template == {"spec": {"schedulerName": "my-scheduler", "schedulingGroup": {"podGroupName": "test"}}}
    assert overridden_scheduler_name(template, NATIVE) is None
    assert (NATIVE.is_native, NATIVE.is_volcano, NATIVE.api_version) == (True, False, "scheduling.k8s.io/v1alpha2")


@pytest.mark.parametrize(("current", "kind", "differs"), [
    pytest.param({"controllerRef": {"apiGroup": "kubeflow.org", "kind": "MPIJob", "name": "test"},
                  "podGroupTemplates": [{"name": "mpijob", "schedulingPolicy": {"gang": {"minCount": 4}},
                                         "schedulingConstraints": None}]}, "Workload", False,
                 id="Workload as stored: a null the server adds"),
    pytest.param({"podGroupTemplateRef": {"workload": {"workloadName": "test", "podGroupTemplateName": "mpijob"}},
                  "schedulingPolicy": {"gang": {"minCount": 4}}, "disruptionMode": "Pod"}, "PodGroup", False,
                 id="PodGroup as stored: the default disruptionMode"),
    pytest.param({"podGroupTemplateRef": {"workload": {"workloadName": "test", "podGroupTemplateName": "mpijob"}},
                  "schedulingPolicy": {"gang": {"minCount": 5}}}, "PodGroup", True, id="another minCount"),
])
def test_native_spec_differs(current: JSONDict, kind: str, differs: bool) -> None:
    job = pg_job(Launcher=replica_with(1, ("1", "1Gi")), Worker=replica_with(3, ("1", "1Gi")))
    desired = (build_workload(job) if kind == "Workload" else build_native_pod_group(job))["spec"]
    assert native_spec_differs(current, desired, kind) is differs
