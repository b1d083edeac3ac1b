"""Helpers for MPIJob integration tests: build jobs, read objects, wait on conditions."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import JSON
from hack.devcluster.rest import ApiError
from hack.devcluster.wait import wait_for

T = TypeVar("T")


def until(predicate: Callable[[], T | None], timeout: float = 60, interval: float = 0.2, what: str = "condition") -> T:
    """Poll ``predicate`` until it returns something other than None (or false), with a deadline."""
    value = wait_for(predicate, timeout=timeout, interval=interval, what=what)
    assert value is not None
    return value


def history(cluster: LocalCluster, collection: str, since: str) -> list[tuple[int, JSON]]:
    """Every version of the objects of ``collection`` written after resourceVersion ``since``, in etcd's order: a
    watch from ``since`` replays them (within etcd's compaction window). resourceVersions are opaque to clients, but
    in one etcd they grow with every write, which is what the order of two resources' writes is read from here."""
    status, text = cluster.rest.request_raw("GET", f"{collection}?watch=1&resourceVersion={since}&timeoutSeconds=2")
    assert status == 200, text
    objects = [json.loads(line)["object"] for line in text.splitlines() if line.strip()]
    return [(int(obj["metadata"]["resourceVersion"]), obj) for obj in objects]


class Jobs:
    """REST access to one namespace of the test cluster."""

    def __init__(self, cluster: LocalCluster, namespace: str) -> None:
        self.cluster, self.ns = cluster, namespace

    def path(self, plural: str, name: str = "", group: str = "") -> str:
        base = f"/apis/{group}" if group else "/api/v1"
        return f"{base}/namespaces/{self.ns}/{plural}" + (f"/{name}" if name else "")

    def pod_quota(self, name: str, pods: int) -> str:
        """A ResourceQuota of ``pods`` pods in the namespace, once the quota controller accounts it (before
        that, creates are refused with another message); its path."""
        quota = self.path("resourcequotas", name)
        self.cluster.rest.create(self.path("resourcequotas"), {"apiVersion": "v1", "kind": "ResourceQuota",
                                                               "metadata": {"name": name},
                                                               "spec": {"hard": {"pods": str(pods)}}})
        wait_for(lambda: (self.cluster.rest.get(quota).get("status") or {}).get("hard"), timeout=30,
                 what="the quota controller to account the ResourceQuota")
        return quota

    def create(self, job: JSON) -> JSON:
        return self.cluster.rest.create(self.path("mpijobs", group="kubeflow.org/v2beta1"), job)

    def get(self, name: str) -> JSON:
        return self.cluster.rest.get(self.path("mpijobs", name, "kubeflow.org/v2beta1"))

    def patch(self, name: str, patch: JSON) -> JSON:
        return self.cluster.rest.merge_patch(self.path("mpijobs", name, "kubeflow.org/v2beta1"), patch)

    def delete(self, name: str) -> None:
        self.cluster.rest.request("DELETE", self.path("mpijobs", name, "kubeflow.org/v2beta1"),
                                  {"propagationPolicy": "Background"})

    def pods(self, selector: str = "") -> list[JSON]:
        query = f"?labelSelector={selector}" if selector else ""
        items: list[JSON] = self.cluster.rest.get(self.path("pods") + query)["items"]
        return items

    def workers(self, job: str) -> list[JSON]:
        pods = self.pods(f"training.kubeflow.org/job-name={job},training.kubeflow.org/job-role=worker")
        return sorted((p for p in pods if not p["metadata"].get("deletionTimestamp")),
                      key=lambda p: p["metadata"]["name"])

    def object(self, plural: str, name: str, group: str = "") -> JSON | None:
        try:
            return self.cluster.rest.get(self.path(plural, name, group))
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def must(self, plural: str, name: str, group: str = "") -> JSON:
        """The object, which must exist."""
        obj = self.object(plural, name, group)
        assert obj is not None, f"{plural}/{name} does not exist"
        return obj

    def launcher(self, job: str) -> JSON | None:
        return self.object("jobs", f"{job}-launcher", "batch/v1")

    def wait_launcher(self, job: str, *, suspended: bool | None = None, timeout: float = 60) -> JSON:
        """The launcher Job, once it exists (and, if asked, is or is not suspended)."""
        def found() -> JSON | None:
            launcher = self.launcher(job)
            if launcher is None or (suspended is not None and bool(launcher["spec"].get("suspend")) != suspended):
                return None
            return launcher

        return until(found, timeout=timeout, what=f"launcher of {job}")

    def events(self, job: str) -> list[JSON]:
        events: list[JSON] = self.cluster.rest.get(
            self.path("events") + f"?fieldSelector=involvedObject.name={job},involvedObject.kind=MPIJob")["items"]
        return sorted(events, key=lambda e: e["metadata"]["creationTimestamp"])

    def condition(self, job: str, kind: str) -> JSON | None:
        for cond in (self.get(job).get("status") or {}).get("conditions") or []:
            if cond["type"] == kind:
                return dict(cond)
        return None

    def wait_condition(self, job: str, kind: str, status: str = "True", timeout: float = 60) -> JSON:
        def found() -> JSON | None:
            cond = self.condition(job, kind)
            return cond if cond and cond["status"] == status else None

        return until(found, timeout=timeout, what=f"{job} {kind}={status}")

    def wait_workers(self, job: str, count: int, phase: str | None = None, timeout: float = 60) -> list[JSON]:
        def enough() -> tuple[list[JSON]] | None:  # a tuple: an empty list is a valid answer
            pods = self.workers(job)
            if phase is not None:
                pods = [p for p in pods if p.get("status", {}).get("phase") == phase]
            return (pods,) if len(pods) == count else None

        return until(enough, timeout=timeout, what=f"{count} {phase or ''} workers of {job}")[0]

    def wait_gone(self, plural: str, name: str, group: str = "", timeout: float = 60) -> None:
        wait_for(lambda: self.object(plural, name, group) is None, timeout=timeout, interval=0.2,
                 what=f"{plural}/{name} to be deleted")
