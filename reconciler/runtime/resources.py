"""Kubernetes resources by group, version and plural, their REST paths, and how to find an object's controller."""

from __future__ import annotations

from dataclasses import dataclass

from shared.jsondict import JSONDict


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str = "", name: str = "", subresource: str = "") -> str:
        """The REST path: ``/api/v1/namespaces/ns/pods/name/status`` and friends."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if subresource:
            base += f"/{subresource}"
        return base


PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
EVENTS = Resource("", "v1", "events", "Event")
JOBS = Resource("batch", "v1", "jobs", "Job")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)


def controller_of(obj: JSONDict) -> JSONDict | None:
    """The ownerReference with ``controller: true``, if any (a copy)."""
    ref = _controller_ref(obj)
    return None if ref is None else dict(ref)


def _controller_ref(obj: JSONDict) -> JSONDict | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None


def is_controlled_by(obj: JSONDict, owner_uid: str) -> bool:
    """Upstream's ``metav1.IsControlledBy``: the controller reference has the owner's UID."""
    ref = _controller_ref(obj)  # read only: no copy (this runs for every pod of a job, several times a sync)
    return ref is not None and bool(owner_uid) and ref.get("uid") == owner_uid


def meta(obj: JSONDict) -> JSONDict:
    metadata: JSONDict = obj.get("metadata") or {}
    return metadata
