"""Least privilege, proven (issue 7): the reconciler's roles grant exactly what it uses.

The session reconciler runs under its ServiceAccount's token (tests/integration/operator_fixtures.py).
Over the runs below (a job's whole lifecycle; a failurePolicy restart; the children's
get-after-AlreadyExists paths provoked with foreign objects; drift of the Service and Secret repaired; gang
scheduling with both PodGroup flavours and a PriorityClass, and with native gangs; a leader-elected
reconciler in the lock namespace) the API
server's audit log tells which verbs on which resources that ServiceAccount used. Compared with ``deploy/rbac``: nothing
denied, nothing used that is not granted, and nothing granted that was never used unless
``KEPT_UNUSED`` says why it must stay (or ``RACE_ONLY``: used only when a write races the cache).
"""

from __future__ import annotations

import base64
import contextlib
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.devcluster import LocalCluster
from hack.devcluster.audit import audit_events, resource_of
from hack.devcluster.coscheduling import find_scheduler_plugins, install_crds
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.operators import RBAC_MANIFESTS, OperatorReconciler, ServiceAccountCredentials
from hack.devcluster.rest import ApiError
from hack.devcluster.wait import wait_for
from tests.integration.conftest import namespace_name
from tests.integration.mpijobs import Jobs, until
from tests.integration.operator_fixtures import ReconcilerControl

JSON = dict[str, Any]
Grant = tuple[str, str, str]  # apiGroup ("" for core), resource[/subresource], verb
HANG = {"test.mpijob/outcome": "hang"}
PODGROUP_CRDS = Path(__file__).resolve().parent / "crds" / "podgroups.yaml"
GANGS = {"volcano": ("scheduling.volcano.sh", "v1beta1"),
         "scheduler-plugins-scheduler": ("scheduling.x-k8s.io", "v1alpha1")}
SAR = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

# Granted although no request in these runs makes it; each needs a reason that no test can show.
KEPT_UNUSED: dict[Grant, str] = {
    ("kubeflow.org", "mpijobs/finalizers", "update"): (
        "never a request of ours: where the OwnerReferencesPermissionEnforcement admission plugin is on "
        "(OpenShift, hardened clusters) creating a child whose ownerReference has blockOwnerDeletion: true "
        "needs update on the owner's finalizers; upstream grants it for the same reason"),
}
RACE_ONLY: dict[Grant, str] = {
    ("scheduling.k8s.io", plural, "get"): (
        "native gangs read their Workload and PodGroup only when a create answers AlreadyExists (the informer's "
        "cache behind the API server): the same get-after-create path as the other children's, which these runs "
        "do not provoke, so a slow run may take it and a fast one not")
    for plural in ("workloads", "podgroups")}
"""Grants used only when a write races the cache: whether a run uses them depends on its timing."""


def rbac_documents() -> list[JSON]:
    return [d for f in sorted(RBAC_MANIFESTS.glob("*.yaml")) if f.name != "kustomization.yaml"
            for d in yaml.safe_load_all(f.read_text()) if d]


def bound_roles(credentials: ServiceAccountCredentials) -> list[tuple[JSON, str]]:
    """The (Cluster)Roles of deploy/rbac bound to the reconciler's ServiceAccount, with the namespace they
    apply to ("" for everywhere)."""
    docs = rbac_documents()
    subject = {"kind": "ServiceAccount", "name": credentials.name, "namespace": credentials.namespace}
    found = []
    for binding in (d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        if subject not in binding["subjects"]:
            continue
        scope = binding["metadata"].get("namespace", "") if binding["kind"] == "RoleBinding" else ""
        ref = binding["roleRef"]
        [role] = [d for d in docs if d["kind"] == ref["kind"] and d["metadata"]["name"] == ref["name"]
                  and (ref["kind"] == "ClusterRole" or d["metadata"].get("namespace") == scope)]
        found.append((role, scope))
    return found


def grants(role: JSON) -> set[Grant]:
    return {(group, resource, verb) for rule in role.get("rules") or [] for group in rule.get("apiGroups", [])
            for resource in rule.get("resources", []) for verb in rule["verbs"]}


@dataclass
class Usage:
    """What one user did, from the audit log: (apiGroup, resource, verb) -> the namespaces ("" = all)."""

    used: dict[Grant, set[str]] = field(default_factory=dict)
    denied: list[str] = field(default_factory=list)
    non_resource: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, log: Path, username: str, offset: int = 0) -> Usage:
        usage = cls()
        for event in audit_events(log, offset=offset):
            if (event.get("user") or {}).get("username") != username:
                continue
            what = f"{event['verb']} {event['requestURI']}"
            # RBAC's answer; a 403 of admission (a create in a namespace being deleted) is no denial of ours
            if (event.get("annotations") or {}).get("authorization.k8s.io/decision") == "forbid":
                usage.denied.append(what)
            ref = event.get("objectRef")
            if not ref:
                usage.non_resource.add(what)
                continue
            grant = (str(ref.get("apiGroup", "")), resource_of(event), str(event["verb"]))
            usage.used.setdefault(grant, set()).add(str(ref.get("namespace", "")))
        return usage


def audit_size(cluster: LocalCluster) -> int:
    assert cluster.audit_log is not None, "the session's API server writes no audit log"
    return cluster.audit_log.stat().st_size if cluster.audit_log.exists() else 0


def new_namespace(cluster: LocalCluster, base: str) -> str:
    name = namespace_name(base)
    cluster.rest.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def drop_namespace(cluster: LocalCluster, name: str) -> None:
    cluster.rest.request("DELETE", f"/api/v1/namespaces/{name}", {"propagationPolicy": "Background"})


def audited(cluster: LocalCluster, username: str, verb: str, path: str, offset: int) -> bool:
    """Whether ``username`` made a ``verb`` request of ``path`` since byte ``offset`` of the audit log."""
    assert cluster.audit_log is not None
    return any((e.get("user") or {}).get("username") == username and e["verb"] == verb
               and e["requestURI"].split("?")[0] == path for e in audit_events(cluster.audit_log, offset=offset))


def foreign_objects(jobs: Jobs, username: str) -> None:
    """A foreign ConfigMap, Service, Secret and worker Pod in the way of four jobs: a create answers 409
    (the informers only cache labelled children), so the reconciler GETs each to see whose it is."""
    offset = audit_size(jobs.cluster)
    foreign: list[tuple[str, str, JSON]] = [
        ("cm", "configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-config"}}),
        ("svc", "services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
                             "spec": {"ports": [{"port": 80}]}}),
        ("sec", "secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sec-ssh"}}),
        ("pod", "pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod-worker-0"},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    ]
    for job, plural, obj in foreign:
        jobs.cluster.rest.create(jobs.path(plural), obj)
        jobs.create(mpijob(job, 1, launcher_labels=HANG))
    for job, plural, obj in foreign:
        path = jobs.path(plural, obj["metadata"]["name"])
        wait_for(partial(audited, jobs.cluster, username, "get", path, offset), timeout=60,
                 what=f"the reconciler reading the foreign {plural} in the way of {job}")
        assert jobs.launcher(job) is None
        jobs.delete(job)


def stale_start_time(jobs: Jobs, name: str) -> None:
    """Once the Job controller has suspended the launcher (and cleared its startTime), put a startTime back,
    as when a job is resumed before the Job controller saw the suspension: the reconciler must clear it
    (jobs/status) before it may change the launcher's template."""
    path = jobs.path("jobs", name, "batch/v1")

    def suspended() -> tuple[JSON, str] | None:
        job = jobs.cluster.rest.get(path)
        for condition in (job.get("status") or {}).get("conditions") or []:
            if condition["type"] == "Suspended" and condition["status"] == "True":
                return job, condition["lastTransitionTime"]
        return None

    job, since = until(suspended, timeout=30, what=f"the Job controller suspending {name}")
    assert "startTime" not in job["status"]
    jobs.cluster.rest.request("PUT", path + "/status", {**job, "status": {**job["status"], "startTime": since}})


def failure_policy_restart(jobs: Jobs) -> None:
    """A job whose failurePolicy (kept in the v2-spec annotation) restarts it when a worker is disrupted: the
    launcher Job is deleted (in the foreground) and made anew."""
    policy = ('{"spec":{"runPolicy":{"failurePolicy":{"maxRestarts":1,"rules":[{"action":"RestartJob",'
              '"name":"disrupted","onPodConditions":[{"status":"True","type":"DisruptionTarget"}]}]}}}}')
    job = mpijob("restarts", 1, launcher_labels=HANG)
    job["metadata"]["annotations"] = {"mpijobs.kubeflow.org/v2-spec": policy}
    jobs.create(job)
    jobs.wait_condition("restarts", "Running", timeout=90)
    jobs.cluster.rest.request("PATCH", jobs.path("pods", "restarts-worker-0") + "/status", {"status": {
        "phase": "Failed", "conditions": [{"type": "DisruptionTarget", "status": "True"}]}},
        content_type="application/merge-patch+json")
    wait_for(lambda: ((jobs.launcher("restarts") or {}).get("metadata") or {}).get("labels", {}).get(
        "mpijobs.kubeflow.org/restart-attempt") == "1", timeout=60, what="the launcher Job of the next attempt")


def lifecycle(jobs: Jobs) -> None:
    """Create, run, scale up and down, drift repaired, suspend, resume, succeed (cleanPodPolicy Running),
    delete: children go with the garbage collector."""
    jobs.create(mpijob("life", 2, launcher_labels=HANG, runPolicy={"cleanPodPolicy": "Running"}))
    jobs.wait_condition("life", "Running", timeout=90)
    jobs.patch("life", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 3}}}})
    jobs.wait_workers("life", 3, "Running")
    wait_for(lambda: jobs.must("configmaps", "life-config")["data"]["hostfile"].count("life-worker-") == 3,
             timeout=30, what="the hostfile with 3 workers")
    jobs.patch("life", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 1}}}})
    jobs.wait_workers("life", 1)
    # drift: the reconciler repairs the Service and gives the Secret a new key pair
    jobs.cluster.rest.merge_patch(jobs.path("services", "life"), {"spec": {"publishNotReadyAddresses": True}})
    wait_for(lambda: not jobs.must("services", "life")["spec"].get("publishNotReadyAddresses"), timeout=30,
             what="the Service repaired")
    jobs.cluster.rest.merge_patch(jobs.path("secrets", "life-ssh"), {"data": {"ssh-publickey": None}})
    wait_for(lambda: set(jobs.must("secrets", "life-ssh")["data"]) == {"ssh-privatekey", "ssh-publickey"},
             timeout=30, what="the Secret given a new key pair")
    jobs.patch("life", {"spec": {"runPolicy": {"suspend": True}}})
    jobs.wait_condition("life", "Suspended")
    jobs.wait_workers("life", 0)
    jobs.wait_launcher("life", suspended=True)
    stale_start_time(jobs, "life-launcher")
    # the launcher runs 3 s after the resume, so the recreated workers are Running when it succeeds
    jobs.patch("life", {"spec": {"runPolicy": {"suspend": False}, "mpiReplicaSpecs": {"Launcher": {"template": {
        "metadata": {"labels": {"test.mpijob/outcome": "succeed"}, "annotations": {"test.mpijob/run-for": "3s"}}}}}}})
    jobs.wait_condition("life", "Succeeded", timeout=90)
    jobs.wait_workers("life", 0)
    jobs.delete("life")
    for plural, name, group in (("services", "life", ""), ("configmaps", "life-config", ""),
                                ("secrets", "life-ssh", ""), ("jobs", "life-launcher", "batch/v1")):
        jobs.wait_gone(plural, name, group)


def gated_start(jobs: Jobs) -> None:
    """A WaitForWorkersReady job: its launcher is created once every worker is Ready and its name resolves, which
    the reconciler reads from the Service's EndpointSlices (list)."""
    jobs.create(mpijob("gated", 2, launcher_labels=HANG, launcherCreationPolicy="WaitForWorkersReady"))
    jobs.wait_condition("gated", "Running", timeout=90)
    jobs.delete("gated")


def native_gang_lifecycle(jobs: Jobs) -> None:
    """A job with native gangs: Workload and PodGroup created, deleted and made anew when the gang changes
    (they are immutable; the PodGroup stays terminating while pods name it), deleted on suspend."""
    native = "scheduling.k8s.io/v1alpha2"
    jobs.create(mpijob("native", 2, runPolicy={"cleanPodPolicy": "Running", "schedulingPolicy": {"minAvailable": 3}}))
    for plural in ("workloads", "podgroups"):
        until(partial(jobs.object, plural, "native", native), timeout=30, what=f"the {plural}")
    jobs.wait_workers("native", 2)
    jobs.patch("native", {"spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}})
    wait_for(lambda: (jobs.object("workloads", "native", native) or {}).get("spec", {}).get("podGroupTemplates", [
        {}])[0].get("schedulingPolicy") == {"gang": {"minCount": 2}}, timeout=30, what="a Workload for 2 pods")
    jobs.patch("native", {"spec": {"runPolicy": {"suspend": True}}})
    jobs.wait_workers("native", 0)
    jobs.wait_gone("podgroups", "native", native)
    jobs.wait_gone("workloads", "native", native)
    jobs.delete("native")
    jobs.wait_gone("jobs", "native-launcher", "batch/v1")


def gang_lifecycle(jobs: Jobs, gang: str, priority_class: str) -> None:
    """A gang-scheduled job with a PriorityClass: PodGroup created, its spec replaced, deleted on suspend."""
    group, version = GANGS[gang]
    template = {"spec": {"priorityClassName": priority_class, "containers": [{"name": "main", "image": "i"}]}}
    job = mpijob("gang", 2, runPolicy={"cleanPodPolicy": "Running", "schedulingPolicy": {"minAvailable": 3}})
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"] = template
    jobs.create(job)
    until(lambda: jobs.object("podgroups", "gang", f"{group}/{version}"), timeout=30, what="the PodGroup")
    jobs.wait_workers("gang", 2)
    jobs.patch("gang", {"spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}})
    wait_for(lambda: jobs.must("podgroups", "gang", f"{group}/{version}")["spec"]["minMember"] == 2, timeout=30,
             what="the PodGroup following minAvailable")
    jobs.patch("gang", {"spec": {"runPolicy": {"suspend": True}}})
    jobs.wait_gone("podgroups", "gang", f"{group}/{version}")
    jobs.wait_workers("gang", 0)
    jobs.delete("gang")
    jobs.wait_gone("jobs", "gang-launcher", "batch/v1")


def lease_holder(cluster: LocalCluster, namespace: str) -> JSON | None:
    try:
        spec: JSON = cluster.rest.get(
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/mpi-operator").get("spec") or {}
    except ApiError as error:
        if error.status == 404:
            return None
        raise
    return spec


def leader_elected_run(cluster: LocalCluster, work_dir: Path, credentials: ServiceAccountCredentials,
                       lock_namespace: str, watched: str) -> None:
    """A second reconciler, leader election on, under the same token; it watches one empty namespace so that
    it never competes with the session reconciler. It must acquire the Lease and renew it at least once."""
    # An earlier test may have left the Lease (released): start without one, so that create is used too.
    lease = f"/apis/coordination.k8s.io/v1/namespaces/{lock_namespace}/leases/mpi-operator"
    with contextlib.suppress(ApiError):
        cluster.rest.request("DELETE", lease)
    process = OperatorReconciler(cluster, work_dir, "--leader-elect=true", f"--lock-namespace={lock_namespace}",
                                 f"--namespace={watched}", name=f"leader-{uuid.uuid4().hex[:6]}",
                                 kubeconfig=credentials.kubeconfig)
    process.start()
    try:
        process.wait_ready()  # "caches synced" comes only after "became leader"
        assert "became leader" in process.log.read_text()
        first = until(lambda: lease_holder(cluster, lock_namespace), timeout=30, what="the Lease")
        wait_for(lambda: (lease_holder(cluster, lock_namespace) or {}).get("renewTime") != first.get("renewTime"),
                 timeout=30, interval=0.5, what="a Lease renewal")
        process.check_alive()
    finally:
        process.stop()


@dataclass
class Runs:
    usage: Usage
    credentials: ServiceAccountCredentials
    lock_namespace: str


@pytest.fixture(scope="module")
def runs(cluster: LocalCluster, reconciler: ReconcilerControl, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[Runs]:
    assert cluster.audit_log is not None
    credentials = reconciler.credentials
    lock_namespace = next(scope for _, scope in bound_roles(credentials) if scope)
    start = audit_size(cluster)
    namespaces = [new_namespace(cluster, n) for n in ("least-privilege", "least-privilege-gang", "lp-leader")]
    plain, gang_ns, watched = namespaces
    priority_class = f"lp-{uuid.uuid4().hex[:6]}"
    try:
        jobs = Jobs(cluster, plain)
        foreign_objects(jobs, credentials.username)
        lifecycle(jobs)
        gated_start(jobs)
        failure_policy_restart(jobs)
        cluster.kubectl("apply", "-f", str(PODGROUP_CRDS), check=True)  # Volcano's stand-in
        cluster.kubectl("wait", "--for=condition=Established", "-f", str(PODGROUP_CRDS), "--timeout=60s", check=True)
        install_crds(cluster, find_scheduler_plugins())  # scheduler-plugins' own
        cluster.rest.create("/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": priority_class},
            "value": 1000})
        try:
            for gang in GANGS:
                reconciler.restart(f"--gang-scheduling={gang}")
                gang_lifecycle(Jobs(cluster, gang_ns), gang, priority_class)
            reconciler.restart("--gang-scheduling=kube-scheduler")
            native_gang_lifecycle(Jobs(cluster, gang_ns))
        finally:
            reconciler.restart()
            cluster.rest.request("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{priority_class}")
        leader_elected_run(cluster, tmp_path_factory.mktemp("least-privilege"), credentials, lock_namespace, watched)
        usage = Usage.of(cluster.audit_log, credentials.username, offset=start)
        usage.denied = Usage.of(cluster.audit_log, credentials.username).denied  # the whole session so far
        yield Runs(usage, credentials, lock_namespace)
    finally:
        for name in namespaces:
            drop_namespace(cluster, name)


def describe(used: dict[Grant, set[str]]) -> str:
    return "\n".join(f"  {g or 'core'} {r} {v}: {sorted(ns) if ns != {''} else 'all namespaces'}"
                     for (g, r, v), ns in sorted(used.items()))


def status_as(credentials: ServiceAccountCredentials, cluster: LocalCluster, path: str) -> int:
    """The HTTP status of a GET of ``path`` with the ServiceAccount's token."""
    [user] = yaml.safe_load(credentials.kubeconfig.read_text())["users"]
    token = user["user"]["token"]
    request = urllib.request.Request(cluster.server + path, headers={"Authorization": f"Bearer {token}"})
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_no_request_of_the_reconciler_was_denied(runs: Runs, cluster: LocalCluster) -> None:
    assert runs.usage.used, "no request of the reconciler's ServiceAccount in the audit log"
    assert runs.usage.denied == [], "requests of the reconciler RBAC forbade (403)"
    # and a denial would have been seen: one made on purpose, after the runs
    assert cluster.audit_log is not None
    offset = audit_size(cluster)
    assert status_as(runs.credentials, cluster, "/api/v1/nodes") == 403
    assert Usage.of(cluster.audit_log, runs.credentials.username, offset=offset).denied == ["list /api/v1/nodes"]


def test_everything_used_is_granted(runs: Runs) -> None:
    roles = bound_roles(runs.credentials)
    missing: dict[Grant, set[str]] = {}
    for grant, namespaces in runs.usage.used.items():
        for ns in namespaces:
            if not any(grant in grants(role) and scope in ("", ns) for role, scope in roles):
                missing.setdefault(grant, set()).add(ns)
    print(f"used by {runs.credentials.username}:\n{describe(runs.usage.used)}")
    assert not missing, f"used but not granted:\n{describe(missing)}"
    # the only non-resource URLs a client may need are the discovery ones every authenticated user has
    assert all(u.split(" ", 1)[1].split("?")[0] in ("/version", "/api", "/apis", "/healthz")
               for u in runs.usage.non_resource), runs.usage.non_resource


def test_everything_granted_is_used(runs: Runs) -> None:
    granted = {g for role, _ in bound_roles(runs.credentials) for g in grants(role)}
    unused = granted - set(runs.usage.used) - set(KEPT_UNUSED) - set(RACE_ONLY)
    assert not unused, "granted but never used:\n" + "\n".join(f"  {g or 'core'} {r} {v}"
                                                               for g, r, v in sorted(unused))
    assert set(KEPT_UNUSED) | set(RACE_ONLY) <= granted, "KEPT_UNUSED or RACE_ONLY names a rule no longer granted"
    assert not set(KEPT_UNUSED) & set(runs.usage.used), "KEPT_UNUSED names a rule that is used after all"


def test_leases_are_granted_only_in_the_lock_namespace(runs: Runs, cluster: LocalCluster) -> None:
    leases = {ns for (group, resource, _), namespaces in runs.usage.used.items()
              if (group, resource) == ("coordination.k8s.io", "leases") for ns in namespaces}
    assert leases == {runs.lock_namespace}, "the reconciler used Leases, and only in the lock namespace"
    account = runs.credentials
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{account.namespace}", "system:authenticated"]

    def allowed(namespace: str, verb: str) -> bool:
        review = cluster.rest.create(SAR, {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": account.username, "groups": groups, "resourceAttributes": {
                "namespace": namespace, "verb": verb, "group": "coordination.k8s.io", "resource": "leases"}}})
        return bool(review["status"].get("allowed"))

    for verb in ("get", "create", "update"):
        assert allowed(runs.lock_namespace, verb), verb
        assert not allowed("default", verb), f"{verb} leases outside {runs.lock_namespace}"
    assert not allowed(runs.lock_namespace, "delete")


def test_the_token_is_not_admin(runs: Runs, cluster: LocalCluster) -> None:
    """The kubeconfig the session reconciler uses carries the ServiceAccount token, nothing else."""
    config = yaml.safe_load(runs.credentials.kubeconfig.read_text())
    [user] = config["users"]
    assert set(user["user"]) == {"token"}
    [context] = config["clusters"]
    assert base64.b64decode(context["cluster"]["certificate-authority-data"]) == cluster.ca_file.read_bytes()
