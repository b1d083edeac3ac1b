"""The fault suite's workload: seeded MPIJob plans, a driver that runs them, and the checks.

``plan_jobs(rng, count, ...)`` draws ``count`` jobs of mixed sizes, MPI implementations and policies
(cleanPodPolicy, launcherCreationPolicy, runLauncherAsWorker, created suspended then resumed, failing
launchers). ``Driver`` creates them on their schedule, resumes the suspended ones, calls a fault hook
every tick and returns when every job is in a terminal state. The checks read the cluster and the API
server's audit log: objects created once, workers left as the policy says, writes by the reconciler,
children left behind once the MPIJobs are deleted (orphans).
"""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from hack.devcluster import LocalCluster
from hack.devcluster.audit import WRITE_VERBS, audit_events, resource_of
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.rest import ApiError, RestClient, client_context

JSON = dict[str, Any]
IMPLEMENTATIONS = ("OpenMPI", "Intel", "MPICH")
CLEAN_POD_POLICIES = ("Running", "All", "None")
SIZES = (1, 1, 2, 2, 3, 4, 4, 8, 8, 16, 16, 24, 32, 48, 64, 96, 128, 256)
GROUP = "kubeflow.org/v2beta1"
USER_AGENT = "mpi-operator"
CHILD_RESOURCES = ("pods", "services", "configmaps", "secrets", "jobs")
TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class JobPlan:
    name: str
    workers: int
    implementation: str
    clean_pod_policy: str
    wait_for_workers: bool  # launcherCreationPolicy WaitForWorkersReady (else AtStartup)
    launcher_as_worker: bool
    suspended: bool  # created suspended, resumed by the driver `resume_after` s after it is Suspended
    fails: bool  # the launcher fails (backoffLimit 0): the job must end Failed
    run_for: float  # seconds the launcher runs
    create_at: float  # seconds after the driver starts
    resume_after: float = 0.0

    @property
    def expected(self) -> str:
        return "Failed" if self.fails else "Succeeded"

    @property
    def workers_left(self) -> int:
        """Workers still there once the job is finished: cleanPodPolicy None keeps its Running workers."""
        return self.workers if self.clean_pod_policy == "None" else 0

    def manifest(self) -> JSON:
        labels = {"test.mpijob/outcome": "fail"} if self.fails else None
        run_policy: JSON = {"cleanPodPolicy": self.clean_pod_policy, "backoffLimit": 0}
        if self.suspended:
            run_policy["suspend"] = True
        return mpijob(self.name, self.workers, launcher_labels=labels,
                      launcher_annotations={"test.mpijob/run-for": f"{self.run_for:.1f}s"},
                      mpiImplementation=self.implementation, runPolicy=run_policy,
                      launcherCreationPolicy="WaitForWorkersReady" if self.wait_for_workers else "AtStartup",
                      runLauncherAsWorker=self.launcher_as_worker)

    def describe(self) -> str:
        flags = [self.implementation, f"clean={self.clean_pod_policy}",
                 "WaitForWorkersReady" if self.wait_for_workers else "AtStartup"]
        flags += ["launcherAsWorker"] * self.launcher_as_worker + ["suspended"] * self.suspended
        flags += ["fails"] * self.fails
        return f"{self.name}: W={self.workers} {' '.join(flags)}"


def plan_jobs(rng: random.Random, count: int, *, spread: float, max_workers: int = 256,
              run_for: tuple[float, float] = (2.0, 12.0)) -> list[JobPlan]:
    """``count`` jobs created over ``spread`` seconds; the first is the largest size allowed, the second
    has one worker, the rest are drawn from SIZES. Every implementation, policy and outcome occurs."""
    sizes = [s for s in SIZES if s <= max_workers]
    plans = []
    for i in range(count):
        workers = max_workers if i == 0 else 1 if i == 1 else rng.choice(sizes)
        plans.append(JobPlan(
            name=f"j{i:02d}-w{workers}", workers=workers,
            implementation=IMPLEMENTATIONS[i % 3], clean_pod_policy=CLEAN_POD_POLICIES[(i // 3) % 3],
            wait_for_workers=rng.random() < 0.3, launcher_as_worker=rng.random() < 0.2,
            suspended=i % 5 == 2, fails=i % 4 == 3, run_for=round(rng.uniform(*run_for), 1),
            create_at=0.0 if i == 0 else round(rng.uniform(0, spread), 1),
            resume_after=round(rng.uniform(1.0, 6.0), 1)))
    return sorted(plans, key=lambda p: p.create_at)


def condition(job: JSON, kind: str) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return str(cond.get("status"))
    return None


def terminal_state(job: JSON) -> str | None:
    return next((kind for kind in TERMINAL if condition(job, kind) == "True"), None)


def mpijobs_path(namespace: str, name: str = "") -> str:
    return f"/apis/{GROUP}/namespaces/{namespace}/mpijobs" + (f"/{name}" if name else "")


def core_path(namespace: str, plural: str) -> str:
    group = "/apis/batch/v1" if plural == "jobs" else "/api/v1"
    return f"{group}/namespaces/{namespace}/{plural}"


@dataclass
class Outcome:
    """What one run of the plans took and ended in."""

    namespace: str
    seconds: float = 0.0
    created_at: dict[str, float] = field(default_factory=dict)
    resumed_at: dict[str, float] = field(default_factory=dict)  # wall clock (time.time()) of the resume patch
    finished_at: dict[str, float] = field(default_factory=dict)
    states: dict[str, str | None] = field(default_factory=dict)
    audit_offset: int = 0

    def durations(self) -> list[float]:
        return sorted(self.finished_at[n] - self.created_at[n] for n in self.finished_at)


class Driver:
    """Runs ``plans`` in ``namespace``: creates each job at its time, resumes suspended ones once they report
    Suspended, calls ``tick(elapsed)`` about every ``interval`` s, until every job is terminal."""

    def __init__(self, cluster: LocalCluster, namespace: str, plans: list[JobPlan], *,
                 tick: Callable[[float], None] = lambda _: None, interval: float = 0.25) -> None:
        self.cluster, self.namespace, self.plans = cluster, namespace, plans
        self.tick, self.interval = tick, interval

    def run(self, timeout: float) -> Outcome:
        rest = self.cluster.rest
        outcome = Outcome(self.namespace, audit_offset=audit_size(self.cluster))
        pending = list(self.plans)
        suspended_seen: dict[str, float] = {}
        began = time.monotonic()
        while True:
            elapsed = time.monotonic() - began
            while pending and pending[0].create_at <= elapsed:
                plan = pending.pop(0)
                rest.create(mpijobs_path(self.namespace), plan.manifest())
                outcome.created_at[plan.name] = time.monotonic()
            items = {j["metadata"]["name"]: j for j in rest.get(mpijobs_path(self.namespace))["items"]}
            for plan in self.plans:
                job = items.get(plan.name)
                if job is None:
                    continue
                state = terminal_state(job)
                if state and plan.name not in outcome.finished_at:
                    outcome.finished_at[plan.name] = time.monotonic()
                    outcome.states[plan.name] = state
                if plan.suspended and plan.name not in outcome.resumed_at and condition(job, "Suspended") == "True":
                    seen = suspended_seen.setdefault(plan.name, time.monotonic())
                    if time.monotonic() - seen >= plan.resume_after:
                        outcome.resumed_at[plan.name] = time.time()
                        rest.merge_patch(mpijobs_path(self.namespace, plan.name),
                                         {"spec": {"runPolicy": {"suspend": False}}})
            if not pending and len(outcome.finished_at) == len(self.plans):
                break
            if elapsed > timeout:
                missing = sorted(p.name for p in self.plans if p.name not in outcome.finished_at)
                raise TimeoutError(f"after {timeout:.0f} s these jobs are not finished: {missing}")
            self.tick(elapsed)
            time.sleep(self.interval)
        outcome.seconds = time.monotonic() - began
        return outcome


# ---- checks
def patient(cluster: LocalCluster, timeout: float = 120) -> RestClient:
    """A client for large lists: a busy API server takes more than the harness' 10 s to answer them."""
    return RestClient(cluster.server, client_context(cluster.ca_file, cluster.admin_cert, cluster.admin_key),
                      timeout=timeout)


def audit_size(cluster: LocalCluster) -> int:
    log = cluster.audit_log
    return log.stat().st_size if log is not None and log.exists() else 0


def audit_in(cluster: LocalCluster, namespace: str, offset: int = 0) -> list[JSON]:
    assert cluster.audit_log is not None
    return [e for e in audit_events(cluster.audit_log, offset=offset)
            if (e.get("objectRef") or {}).get("namespace") == namespace]


def created(events: Iterable[JSON]) -> collections.Counter[tuple[str, str]]:
    """(resource, name) -> successful creates (HTTP 201), whoever made them."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for e in events:
        if e.get("verb") == "create" and (e.get("responseStatus") or {}).get("code") == 201:
            counts[(resource_of(e), str(e["objectRef"].get("name", "")))] += 1
    return counts


def duplicates(events: list[JSON]) -> dict[str, int]:
    """Objects created successfully more than once (by name; every name is used by one job uid only).
    Pods named by the API server (``generateName``: the Job controller's launcher pods) have no name here."""
    return {f"{res}/{name}": n for (res, name), n in created(events).items()
            if n > 1 and name and res in (*CHILD_RESOURCES, "mpijobs")}


def lost_or_foreign_workers(events: list[JSON], plans: list[JobPlan]) -> dict[str, str]:
    """Per job, the worker names that never existed and the ones outside 0..W-1. A worker existed when
    its create was answered 201, or when the scheduler bound it (``pods/binding`` 201): a create still in
    flight when the reconciler was killed is answered 504 by the API server, and may have been stored."""
    counts = created(events)
    problems = {}
    for plan in plans:
        prefix = f"{plan.name}-worker-"
        want = {f"{prefix}{i}" for i in range(plan.workers)}
        got = {name for (res, name), n in counts.items() if res in ("pods", "pods/binding") and name.startswith(prefix)}
        if want != got:
            problems[plan.name] = f"missing {sorted(want - got)[:5]}, unexpected {sorted(got - want)[:5]}"
    return problems


def unanswered_creates(events: list[JSON]) -> int:
    """Creates answered 5xx: in flight when their client died (the API server logs 504), outcome unknown."""
    return sum(1 for e in events if e.get("verb") == "create" and (e.get("responseStatus") or {}).get("code", 0) >= 500)


def event_reasons(cluster: LocalCluster, namespace: str) -> collections.Counter[str]:
    """reason -> count of the Events about MPIJobs in the namespace."""
    events = patient(cluster).get(f"/api/v1/namespaces/{namespace}/events?fieldSelector=involvedObject.kind=MPIJob")
    return collections.Counter(str(e.get("reason")) for e in events["items"])


def pods_created_while_suspended(events: list[JSON], plans: list[JobPlan], outcome: Outcome) -> list[str]:
    """Pods of a job created before the patch that resumed it (none may exist while it is suspended)."""
    bad = []
    for plan in plans:
        if not plan.suspended or plan.name not in outcome.resumed_at:
            continue
        for e in events:
            name = str((e.get("objectRef") or {}).get("name", ""))
            if (e.get("verb") == "create" and resource_of(e) == "pods" and name.startswith(f"{plan.name}-")
                    and (e.get("responseStatus") or {}).get("code") == 201
                    and timestamp(e["requestReceivedTimestamp"]) < outcome.resumed_at[plan.name] - 0.5):
                bad.append(name)
    return bad


def timestamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def writes_by_reconciler(events: list[JSON]) -> collections.Counter[str]:
    """'verb resource [code]' -> count, for every write the reconciler made."""
    counts: collections.Counter[str] = collections.Counter()
    for e in events:
        if str(e.get("userAgent", "")).startswith(USER_AGENT) and e.get("verb") in WRITE_VERBS:
            code = (e.get("responseStatus") or {}).get("code", 0)
            counts[f"{e['verb']} {resource_of(e)}" + ("" if 200 <= code < 300 else f" [{code}]")] += 1
    return counts


def wrong_states(cluster: LocalCluster, namespace: str, plans: list[JobPlan]) -> dict[str, str]:
    items = {j["metadata"]["name"]: j for j in cluster.rest.get(mpijobs_path(namespace))["items"]}
    wrong = {}
    for plan in plans:
        job = items.get(plan.name)
        states = [k for k in TERMINAL if job is not None and condition(job, k) == "True"]
        if states != [plan.expected]:
            wrong[plan.name] = f"expected {plan.expected}, has {states} ({plan.describe()})"
    return wrong


def workers_now(cluster: LocalCluster, namespace: str) -> collections.Counter[str]:
    pods = patient(cluster).get(core_path(namespace, "pods") + "?labelSelector=training.kubeflow.org/job-role=worker")
    return collections.Counter(p["metadata"]["labels"]["training.kubeflow.org/job-name"] for p in pods["items"]
                               if not p["metadata"].get("deletionTimestamp"))


def wait_workers_left(cluster: LocalCluster, namespace: str, plans: list[JobPlan],
                      timeout: float = 90) -> dict[str, str]:
    """Until each job has the workers its cleanPodPolicy leaves; what is still different at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        now = workers_now(cluster, namespace)
        wrong = {p.name: f"{now.get(p.name, 0)} workers left, want {p.workers_left} ({p.describe()})"
                 for p in plans if now.get(p.name, 0) != p.workers_left}
        if not wrong or time.monotonic() > deadline:
            return wrong
        time.sleep(0.5)


def leftovers(cluster: LocalCluster, namespace: str) -> list[str]:
    """Every child-kind object left in the namespace (its kube-root-ca.crt ConfigMap excepted)."""
    names = []
    for plural in CHILD_RESOURCES:
        for obj in patient(cluster).get(core_path(namespace, plural))["items"]:
            if plural == "configmaps" and obj["metadata"]["name"] == "kube-root-ca.crt":
                continue
            names.append(f"{plural}/{obj['metadata']['name']}")
    return names


def delete_all_and_wait_for_gc(cluster: LocalCluster, namespace: str, timeout: float = 180) -> tuple[list[str], float]:
    """Delete every MPIJob (background propagation, as a user would) and wait for the garbage collector:
    (the orphans, i.e. children still there at the deadline; the seconds it took)."""
    began = time.monotonic()
    cluster.rest.request("DELETE", mpijobs_path(namespace), {"propagationPolicy": "Background"})
    deadline = began + timeout
    while True:
        left = leftovers(cluster, namespace)
        if not left and not cluster.rest.get(mpijobs_path(namespace))["items"]:
            time.sleep(3)  # a late create of a reconciler with a stale cache would show up now
            left = leftovers(cluster, namespace)
            if not left:
                return [], time.monotonic() - began
        if time.monotonic() > deadline:
            return left, time.monotonic() - began
        time.sleep(0.5)


def delete_namespace(cluster: LocalCluster, namespace: str) -> None:
    try:
        cluster.rest.request("DELETE", f"/api/v1/namespaces/{namespace}", {"propagationPolicy": "Background"})
    except ApiError as error:
        if error.status != 404:
            raise


def create_namespace(cluster: LocalCluster, namespace: str) -> str:
    cluster.rest.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": namespace}})
    return namespace


def write_summary(counter: collections.Counter[str]) -> str:
    return ", ".join(f"{key}: {n}" for key, n in sorted(counter.items()))


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def log_dir(base: Path, name: str) -> Path:
    path = base / name
    path.mkdir(parents=True, exist_ok=True)
    return path
