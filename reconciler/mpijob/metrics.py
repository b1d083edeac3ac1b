"""The reconciler's Prometheus metrics: upstream's (names byte for byte, counted once per transition), and ours:
job start latency and duration, the time launchers are gated, jobs pending and running, reconcile errors, the work
queue's depth and wait."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from reconciler.mpijob.gating import gate_span
from reconciler.mpijob.status import StatusUpdate, find_condition, is_finished, is_true
from shared.api import constants as c
from shared.jsondict import JSONDict, object_at

# a job starts in seconds on an idle cluster, in minutes behind image pulls or a gang scheduler's queue
START_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
DURATION_BUCKETS = (10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0, 43200.0, 86400.0, 259200.0)
QUEUE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 10.0, 60.0)
STAGES = {"workers_ready": c.CONDITION_WORKERS_READY, "launcher_running": c.CONDITION_RUNNING}
OUTCOMES = {"succeeded": c.CONDITION_SUCCEEDED, "failed": c.CONDITION_FAILED}
ERROR_KINDS = ("conflict", "api_error", "resource_exists", "unreachable", "internal")


@dataclass
class OperatorMetrics:
    registry: CollectorRegistry = field(default_factory=lambda: REGISTRY)

    def __post_init__(self) -> None:
        self._upstream()
        self.start_latency = Histogram(
            "mpi_operator_job_start_latency_seconds",
            "Time from an MPIJob's creation to its WorkersReady (stage=workers_ready) or Running "
            "(stage=launcher_running) condition becoming True.",
            ["stage"], buckets=START_BUCKETS, registry=self.registry)
        self.duration = Histogram(
            "mpi_operator_job_duration_seconds",
            "Time from an MPIJob's startTime to its completionTime, by outcome (succeeded, failed).",
            ["outcome"], buckets=DURATION_BUCKETS, registry=self.registry)
        self.launcher_gated = Histogram(
            "mpi_operator_launcher_gated_seconds",
            "Time a launcher Job was held suspended waiting for every worker to be Ready (launcherCreationPolicy "
            "WaitForWorkersReady): from the job's Running=False WaitingForWorkers condition to the launcher's "
            "release; once per wait (again after each resume or restart).",
            buckets=START_BUCKETS, registry=self.registry)
        self.reconcile_errors = Counter(
            "mpi_operator_reconcile_errors",
            "Syncs that failed and were requeued, by kind (conflict, api_error, resource_exists, unreachable, "
            "internal).", ["kind"], registry=self.registry)
        self.queue_wait = Histogram(
            "mpi_operator_workqueue_queue_duration_seconds",
            "Time a key waited in the work queue before a worker took it.",
            buckets=QUEUE_BUCKETS, registry=self.registry)
        self.queue_retries = Counter("mpi_operator_workqueue_retries", "Keys requeued with a backoff (rate-limited).",
                                     registry=self.registry)
        self.queue_depth = Gauge("mpi_operator_workqueue_depth", "Keys waiting in the work queue.",
                                 registry=self.registry)
        for stage in STAGES:
            self.start_latency.labels(stage)
        for outcome in OUTCOMES:
            self.duration.labels(outcome)
        for kind in ERROR_KINDS:
            self.reconcile_errors.labels(kind)

    def _upstream(self) -> None:
        self.jobs_created = Counter("mpi_operator_jobs_created", "Counts number of MPI jobs created",
                                    registry=self.registry)
        self.jobs_successful = Counter("mpi_operator_jobs_successful", "Counts number of MPI jobs successful",
                                       registry=self.registry)
        self.jobs_failed = Counter("mpi_operator_jobs_failed", "Counts number of MPI jobs failed",
                                   registry=self.registry)
        self.job_info = Gauge("mpi_operator_job_info", "Information about MPIJob", ["launcher", "namespace"],
                              registry=self.registry)
        self.jobs_restarted = Counter("mpi_operator_jobs_restarted",
                                      "Counts number of MPI jobs restarted by their failurePolicy",
                                      registry=self.registry)
        self.is_leader = Gauge("mpi_operator_is_leader", "Is this client the leader of this mpi-operator client set?",
                               registry=self.registry)

    def count(self, update: StatusUpdate) -> None:
        if update.succeeded:
            self.jobs_successful.inc()
        if update.failed:
            self.jobs_failed.inc()

    def observe_written(self, job: JSONDict, before: JSONDict, after: JSONDict) -> None:
        """The latencies a status write made true: each condition of ``STAGES`` and ``OUTCOMES`` that became True
        (again, after a restart or a resume), timed by the written timestamps."""
        created = parse_time((job.get("metadata") or {}).get("creationTimestamp"))
        for stage, condition in STAGES.items():
            at = became_true(before, after, condition)
            if at is not None and created is not None:
                self.start_latency.labels(stage).observe(max(at - created, 0.0))
        if (span := gate_span(before, after)) is not None:
            began, released = parse_time(span[0]), parse_time(span[1])
            if began is not None and released is not None:
                self.launcher_gated.observe(max(released - began, 0.0))
        started = parse_time(after.get("startTime")) or created
        for outcome, condition in OUTCOMES.items():
            at = became_true(before, after, condition)
            ended = parse_time(after.get("completionTime")) or at
            if at is not None and ended is not None and started is not None:
                self.duration.labels(outcome).observe(max(ended - started, 0.0))

    def watch_queue(self, depth: Callable[[], int]) -> None:
        """The work queue's depth, read at each scrape."""
        self.queue_depth.set_function(depth)

    def watch_jobs(self, jobs: Iterable[JSONDict], clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        """Jobs pending and running (no namespace, no name: one series each), read from ``jobs`` at each scrape."""
        self.registry.register(_JobsCollector(jobs, clock))


def parse_time(value: object) -> float | None:
    """An RFC 3339 timestamp of the API as Unix time, or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def became_true(before: JSONDict, after: JSONDict, condition: str) -> float | None:
    """When ``condition`` became True in ``after`` (its lastTransitionTime), if it was not True in ``before``."""
    if is_true(before, condition) or not is_true(after, condition):
        return None
    found = find_condition(after, condition) or {}
    return parse_time(found.get("lastTransitionTime") or found.get("lastUpdateTime"))


def job_state(job: JSONDict) -> str | None:
    """``running``, ``pending`` (not finished, not suspended, not running), or None for any other job (finished,
    suspended, managed by another controller)."""
    run_policy = object_at(job, "spec", "runPolicy") or {}
    if run_policy.get("managedBy", c.MANAGED_BY_MPI_OPERATOR) != c.MANAGED_BY_MPI_OPERATOR:
        return None
    status = job.get("status") or {}
    if is_finished(status) or run_policy.get("suspend") is True:
        return None
    return "running" if is_true(status, c.CONDITION_RUNNING) else "pending"


class _JobsCollector(Collector):
    def __init__(self, jobs: Iterable[JSONDict], clock: Callable[[], datetime]) -> None:
        self.jobs, self.clock = jobs, clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = {"pending": 0, "running": 0}
        now, oldest = self.clock().timestamp(), 0.0
        for job in self.jobs:
            state = job_state(job)
            if state is None:
                continue
            counts[state] += 1
            since = parse_time((job.get("status") or {}).get("startTime")) or parse_time(
                (job.get("metadata") or {}).get("creationTimestamp"))
            if state == "pending" and since is not None:
                oldest = max(oldest, now - since)
        yield GaugeMetricFamily("mpi_operator_jobs_pending",
                                "MPIJobs not finished, not suspended and not yet running.", value=counts["pending"])
        yield GaugeMetricFamily("mpi_operator_jobs_running", "MPIJobs whose Running condition is True.",
                                value=counts["running"])
        yield GaugeMetricFamily("mpi_operator_jobs_pending_oldest_age_seconds",
                                "How long the oldest pending MPIJob has waited, from its startTime (its creation, "
                                "or its last resume); 0 with no job pending.", value=oldest)
