"""API resources: a kind of object named by group, version and plural, its REST paths, and the built-in ones we use.

What an object says of itself (its metadata, its controller) is in ``metadata.py``.
"""

from __future__ import annotations

from dataclasses import dataclass


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
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
