"""Test helpers over the API package."""

from __future__ import annotations

from shared.api import MPIJob, defaulted_dict
from shared.jsondict import JSONDict


def wire(job: MPIJob) -> JSONDict:
    """The wire form of a typed MPIJob: camelCase keys, unset and null fields left out, unknown fields kept."""
    return job.model_dump(by_alias=True, exclude_none=True, mode="json")


def with_defaults(job: MPIJob) -> MPIJob:
    """A new MPIJob with the Go and CRD defaults applied, by the product's own ``defaulted_dict`` (as the
    reconciler and the webhook's validation apply them); the input is not changed."""
    return MPIJob.model_validate(defaulted_dict(wire(job)))
