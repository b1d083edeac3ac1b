"""Upstream's Prometheus metrics (names byte for byte), counted once per transition."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

from reconciler.mpijob.status import StatusUpdate


@dataclass
class OperatorMetrics:
    registry: CollectorRegistry = field(default_factory=lambda: REGISTRY)

    def __post_init__(self) -> None:
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
