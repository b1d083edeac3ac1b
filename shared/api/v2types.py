"""Pydantic models of kubeflow.org/v2 MPIJob: v2beta1 plus ``spec.runPolicy.failurePolicy``.

Everything else is v2beta1's model (docs/proposals/v2.md, "What stays identical"); the v2 models subclass it,
so every function that takes an ``MPIJob`` takes an ``MPIJobV2`` as well.
"""

from __future__ import annotations

from shared.api import constants as c
from shared.api.types import MPIJob, MPIJobSpec, RunPolicy, _Model


class PodConditionPattern(_Model):
    type: str | None = None
    status: str | None = None  # the CRD defaults it to "True"


class ExitCodesRequirement(_Model):
    container_name: str | None = None
    operator: str | None = None
    values: list[int] | None = None


class FailurePolicyRule(_Model):
    name: str | None = None
    action: str | None = None
    on_replica_types: list[str] | None = None
    on_pod_conditions: list[PodConditionPattern] | None = None
    on_exit_codes: ExitCodesRequirement | None = None


class FailurePolicy(_Model):
    max_restarts: int | None = None
    rules: list[FailurePolicyRule] | None = None


class RunPolicyV2(RunPolicy):
    failure_policy: FailurePolicy | None = None


class MPIJobSpecV2(MPIJobSpec):
    run_policy: RunPolicyV2 | None = None


class MPIJobV2(MPIJob):
    api_version: str | None = c.API_VERSION_V2
    spec: MPIJobSpecV2 | None = None

    @property
    def failure_policy(self) -> FailurePolicy | None:
        run_policy = self.spec.run_policy if self.spec else None
        return run_policy.failure_policy if run_policy else None
