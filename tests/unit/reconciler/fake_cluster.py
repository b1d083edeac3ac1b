"""A small recording fake of our own ``Cluster`` seam (not of the Kubernetes API) for sync tests.

It keeps the objects the test gave the "server", records every write as (verb, resource, name) in
order, fails a write with the status a test asks for (for a resource, or for one object), holds
creates a test names in flight until they are cancelled, and answers 409 AlreadyExists and 404 like
the API server would for names. Like the API server, it gives every write a new resourceVersion and
answers 409 Conflict to a replace, status replace or merge patch that carries a resourceVersion other
than the stored one; a replace keeps the stored status and a status replace keeps all but the status
(as for a resource with a status subresource). ``catch_up`` plays the watch: the caches then show the
server.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from reconciler.mpijob.caches import (
    Caches,
    slim_config_map,
    slim_job,
    slim_mpijob,
    slim_pod,
    slim_pod_group,
    slim_secret,
    slim_service,
)
from reconciler.mpijob.status import Event
from reconciler.runtime.api_resources import Resource
from reconciler.runtime.client import ApiError
from shared.jsondict import JSONDict

_SLIM = {"pods": (slim_pod, "pods"), "jobs": (slim_job, "jobs"), "services": (slim_service, "services"),
         "configmaps": (slim_config_map, "config_maps"), "secrets": (slim_secret, "secrets"),
         "mpijobs": (slim_mpijob, "mpijobs"), "podgroups": (slim_pod_group, "pod_groups"),
         "workloads": (slim_pod_group, "workloads")}


class FakeCluster:
    def __init__(self, caches: Caches) -> None:
        self.caches = caches
        self.server: dict[tuple[str, str, str], JSONDict] = {}
        self.writes: list[tuple[str, str, str, JSONDict]] = []
        self.reads: list[tuple[str, str]] = []  # (resource, name) of every GET
        self.events: list[Event] = []
        self.failures: dict[tuple[str, ...], ApiError] = {}  # (verb, plural) or (verb, plural, name)
        self.stalled: set[str] = set()  # names whose create never answers
        self.cancelled: list[str] = []  # stalled creates that were cancelled
        self._uid = 0
        self._version = 1000  # above every resourceVersion a test gives; one counter for all objects, as etcd's

    def given(self, resource: Resource, obj: JSONDict, *, cached: bool = True) -> JSONDict:
        """An object that exists on the server (and, unless ``cached=False``, in the informer cache)."""
        obj = copy.deepcopy(obj)
        obj.setdefault("kind", resource.kind)
        metadata = obj["metadata"]
        metadata.setdefault("resourceVersion", "1")
        self.server[(resource.plural, metadata.get("namespace", ""), metadata["name"])] = obj
        if cached and resource.plural in _SLIM:  # the reconciler has informers for these only
            slimmer, attr = _SLIM[resource.plural]
            slim = slimmer(copy.deepcopy(obj))
            if slim is not None:
                getattr(self.caches, attr).put(slim)
        return obj

    @property
    def actions(self) -> list[tuple[str, str, str]]:
        """Every write attempted, in order: (verb, resource, name)."""
        return [(verb, plural, name) for verb, plural, name, _ in self.writes]

    def catch_up(self) -> None:
        """The informers deliver everything the server holds: each cache then mirrors the server."""
        seen: dict[str, list[JSONDict]] = {attr: [] for _, attr in _SLIM.values()}
        for (plural, _, _), obj in self.server.items():
            if plural in _SLIM:
                slimmer, attr = _SLIM[plural]
                slim = slimmer(copy.deepcopy(obj))
                if slim is not None:
                    seen[attr].append(slim)
        for attr, objects in seen.items():
            getattr(self.caches, attr).replace(objects)

    def _record(self, verb: str, resource: Resource, obj: JSONDict) -> None:
        name = obj["metadata"]["name"]
        self.writes.append((verb, resource.plural, name, copy.deepcopy(obj)))
        failure = self.failures.get((verb, resource.plural, name)) or self.failures.get((verb, resource.plural))
        if failure is not None:
            raise failure

    async def _stall(self, name: str) -> None:
        if name not in self.stalled:
            return
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(name)
            raise

    async def create(self, resource: Resource, obj: JSONDict) -> JSONDict:
        key = (resource.plural, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        if key in self.server:
            raise ApiError(409, "AlreadyExists", f'{resource.plural} "{key[2]}" already exists')
        await self._stall(key[2])
        self._record("create", resource, obj)
        created = copy.deepcopy(obj)
        created.setdefault("kind", resource.kind)
        self._uid += 1
        created["metadata"].update(uid=f"uid-{self._uid}", resourceVersion=self._next_version())
        self.server[key] = created
        return copy.deepcopy(created)

    async def get(self, resource: Resource, namespace: str, name: str) -> JSONDict:
        self.reads.append((resource.plural, name))
        obj = self.server.get((resource.plural, namespace, name))
        if obj is None:
            raise ApiError(404, "NotFound", f'{resource.plural} "{name}" not found')
        return copy.deepcopy(obj)

    async def list(self, resource: Resource, namespace: str, label_selector: str) -> list[JSONDict]:
        """The stored objects of ``namespace`` whose labels match ``label_selector`` (``key=value`` terms only)."""
        self.reads.append((resource.plural, f"?{label_selector}"))
        wanted = dict(term.split("=", 1) for term in label_selector.split(","))
        return [copy.deepcopy(obj) for (plural, ns, _), obj in self.server.items()
                if plural == resource.plural and ns == namespace
                and wanted.items() <= ((obj["metadata"].get("labels") or {}).items())]

    async def replace(self, resource: Resource, obj: JSONDict) -> JSONDict:
        self._record("update", resource, obj)
        current = self._current(resource, obj["metadata"], obj["metadata"].get("namespace", ""))
        replaced = copy.deepcopy(obj)
        replaced.pop("status", None)
        if "status" in current:  # the status is written through the status subresource only
            replaced["status"] = current["status"]
        return self._store(resource, current, replaced)

    async def replace_status(self, resource: Resource, obj: JSONDict) -> JSONDict:
        self._record("update_status", resource, obj)
        current = self._current(resource, obj["metadata"], obj["metadata"].get("namespace", ""))
        return self._store(resource, current, {**current, "status": copy.deepcopy(obj.get("status"))})

    async def patch(self, resource: Resource, namespace: str, name: str, patch: JSONDict) -> JSONDict:
        self._record("patch", resource, {"metadata": {"name": name}, "patch": patch})
        current = self._current(resource, {"name": name, **(patch.get("metadata") or {})}, namespace)
        return self._store(resource, current, _merge(current, patch))

    async def delete(self, resource: Resource, namespace: str, name: str, propagation: str = "Background") -> None:
        self._record("delete", resource, {"metadata": {"name": name}, "propagationPolicy": propagation})
        if self.server.pop((resource.plural, namespace, name), None) is None:
            raise ApiError(404, "NotFound", f'{resource.plural} "{name}" not found')

    async def record_event(self, involved: JSONDict, event: Event, now: str) -> None:
        self.events.append(event)

    def _current(self, resource: Resource, metadata: JSONDict, namespace: str) -> JSONDict:
        """The stored object a write names, checking the write's resourceVersion precondition, if it has one,
        as the API server does: 404 if there is no such object, 409 Conflict if it changed since it was read."""
        name = metadata["name"]
        current = self.server.get((resource.plural, namespace, name))
        if current is None:
            raise ApiError(404, "NotFound", f'{resource.plural} "{name}" not found')
        expected = metadata.get("resourceVersion")
        if expected and expected != current["metadata"].get("resourceVersion"):
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {resource.plural} "{name}": the object '
                                            "has been modified; please apply your changes to the latest version and "
                                            "try again")
        return current

    def _store(self, resource: Resource, current: JSONDict, new: JSONDict) -> JSONDict:
        """``new`` stored in the place of ``current``, with a new resourceVersion and ``current``'s identity."""
        new = copy.deepcopy(new)
        new.setdefault("kind", resource.kind)
        new["metadata"] = {**new["metadata"], "name": current["metadata"]["name"],
                           "resourceVersion": self._next_version()}
        for key in ("namespace", "uid", "creationTimestamp"):
            if key in current["metadata"]:
                new["metadata"][key] = current["metadata"][key]
        self.server[(resource.plural, current["metadata"].get("namespace", ""), current["metadata"]["name"])] = new
        return copy.deepcopy(new)

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def created(self, plural: str, name: str) -> JSONDict:
        for verb, kind, obj_name, body in self.writes:
            if (verb, kind, obj_name) == ("create", plural, name):
                return body
        raise AssertionError(f"{plural}/{name} was not created")

    def status_written(self) -> JSONDict:
        written = [body for verb, _, _, body in self.writes if verb == "update_status"]
        assert written, "no status was written"
        status: JSONDict = written[-1]["status"]
        return status


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result
