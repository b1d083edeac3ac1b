"""Pydantic models of kubeflow.org/v2beta1 MPIJob.

Wire names are camelCase; unknown fields are kept (``extra="allow"``) so a round trip loses nothing;
pod templates and object metadata stay plain dicts, because they are large, owned by Kubernetes, and
only read in a few places. Models are strict: a string where an integer belongs is an error, not a
coercion.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from shared.api import constants as c
from shared.jsondict import JSONDict


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        strict=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class SchedulingPolicy(_Model):
    min_available: int | None = None
    queue: str | None = None
    min_resources: dict[str, int | str] | None = None
    priority_class: str | None = None
    schedule_timeout_seconds: int | None = None


class RunPolicy(_Model):
    clean_pod_policy: str | None = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    scheduling_policy: SchedulingPolicy | None = None
    suspend: bool | None = None
    managed_by: str | None = None


class ReplicaSpec(_Model):
    replicas: int | None = None
    template: JSONDict | None = None
    restart_policy: str | None = None

    def containers(self) -> list[Any]:
        """The template's containers, or an empty list when any level is missing or malformed."""
        spec = (self.template or {}).get("spec")
        containers = spec.get("containers") if isinstance(spec, dict) else None
        return containers if isinstance(containers, list) else []


class MPIJobSpec(_Model):
    slots_per_worker: int | None = None
    run_launcher_as_worker: bool | None = None
    run_policy: RunPolicy | None = None
    mpi_replica_specs: dict[str, ReplicaSpec | None] | None = None
    ssh_auth_mount_path: str | None = None
    launcher_creation_policy: str | None = None
    mpi_implementation: str | None = None


class JobCondition(_Model):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_update_time: str | None = None
    last_transition_time: str | None = None


class ReplicaStatus(_Model):
    active: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    label_selector: JSONDict | None = None
    selector: str | None = None


class JobStatus(_Model):
    conditions: list[JobCondition] | None = None
    replica_statuses: dict[str, ReplicaStatus] | None = None
    start_time: str | None = None
    completion_time: str | None = None
    last_reconcile_time: str | None = None
    ready_workers: str | None = None  # this operator's: "2/8", the Ready printer column
    restart_count: int | None = None  # restarts by a v2 failurePolicy; in both versions' status (docs/proposals/v2.md)


class MPIJob(_Model):
    api_version: str | None = c.API_VERSION
    kind: str | None = c.KIND
    metadata: JSONDict = {}
    spec: MPIJobSpec | None = None
    status: JobStatus | None = None

    @property
    def name(self) -> str:
        name = self.metadata.get("name")
        return name if isinstance(name, str) else ""

    @property
    def namespace(self) -> str:
        namespace = self.metadata.get("namespace")
        return namespace if isinstance(namespace, str) else ""

    def replica_spec(self, replica_type: str) -> ReplicaSpec | None:
        specs = self.spec.mpi_replica_specs if self.spec else None
        return specs.get(replica_type) if specs else None
