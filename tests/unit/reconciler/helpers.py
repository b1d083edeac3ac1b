"""Shared test helpers: MPIJob factories, the expected owner reference, and an output vandal."""

from __future__ import annotations

from typing import Any

from shared.api import MPIJob
from shared.jsondict import JSONDict
from tests.unit.helpers import with_defaults


def make_job(name: str = "foo", namespace: str = "bar", *, defaulted: bool = True,
             annotations: dict[str, str] | None = None, **spec: Any) -> MPIJob:
    """An MPIJob from a camelCase spec dict, with a UID derived from the name; defaulted unless told."""
    metadata: JSONDict = {"name": name, "namespace": namespace, "uid": f"{name}-uid"}
    if annotations:
        metadata["annotations"] = annotations
    job = MPIJob.model_validate({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                                 "metadata": metadata, "spec": spec})
    return with_defaults(job) if defaulted else job


def replica(template_spec: JSONDict | None = None, replicas: int | None = None, **extra: Any) -> JSONDict:
    """A replica spec dict whose template has the given pod spec (one empty container by default)."""
    out: JSONDict = {"template": {"spec": template_spec or {"containers": [{}]}}, **extra}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def owner_ref(name: str) -> JSONDict:
    """The controller reference ``make_job(name)`` children must carry, spelled out literally."""
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": name, "uid": f"{name}-uid",
            "controller": True, "blockOwnerDeletion": True}


def vandalize(value: Any) -> None:
    """Mutate every dict and list inside ``value`` in place (to prove nothing is shared with the input)."""
    if isinstance(value, dict):
        for child in list(value.values()):
            vandalize(child)
        value["vandalized"] = True
    elif isinstance(value, list):
        for child in value:
            vandalize(child)
        value.append("vandalized")
