"""Test helpers over the API package."""

from __future__ import annotations

from shared.api import MPIJob, defaulted_dict


def with_defaults(job: MPIJob) -> MPIJob:
    """A new MPIJob with the Go and CRD defaults applied, by the product's own ``defaulted_dict`` (as the
    reconciler and the webhook's validation apply them); the input is not changed."""
    return MPIJob.model_validate(defaulted_dict(job.to_dict()))
