"""MPIJob defaulting: upstream's Go defaults (``SetDefaults_MPIJob``) plus the CRD schema defaults.

One table drives both users: ``defaulted_dict`` (the reconciler and validation, in memory) and
``defaults_patch`` (the mutating webhook, as JSON Patch ``add`` operations that only fill what is unset).
"""

from __future__ import annotations

from typing import Any

from shared.api import constants as c
from shared.jsondict import JSONDict

Path = tuple[str, ...]

_SPEC_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("slotsPerWorker", c.DEFAULT_SLOTS_PER_WORKER),
    ("runLauncherAsWorker", False),  # CRD default only (Go leaves it nil, which means false)
    ("sshAuthMountPath", c.DEFAULT_SSH_AUTH_MOUNT_PATH),
    ("launcherCreationPolicy", c.LAUNCHER_AT_STARTUP),
    ("mpiImplementation", c.OPENMPI),
)
_RUN_POLICY_DEFAULTS: tuple[tuple[str, Any], ...] = (("cleanPodPolicy", c.CLEAN_POD_POLICY_NONE),)
# runPolicy.suspend=false is a CRD default: the API server applies it whenever runPolicy exists.
_CRD_RUN_POLICY_DEFAULTS: tuple[tuple[str, Any], ...] = (("suspend", False),)
_REPLICA_DEFAULTS: dict[str, tuple[tuple[str, Any], ...]] = {
    c.LAUNCHER: (("replicas", c.DEFAULT_LAUNCHER_REPLICAS), ("restartPolicy", c.RESTART_ON_FAILURE)),
    c.WORKER: (("replicas", c.DEFAULT_WORKER_REPLICAS), ("restartPolicy", c.RESTART_NEVER)),
}


# The tables above with each field's path from the MPIJob's root, built once: (key, path, value).
Field = tuple[str, Path, Any]


def _fields(parent: Path, defaults: tuple[tuple[str, Any], ...]) -> tuple[Field, ...]:
    return tuple((key, (*parent, key), value) for key, value in defaults)


def _whole(fields: tuple[Field, ...]) -> JSONDict:
    """A new parent object holding all of ``fields``' defaults."""
    return {key: value for key, _, value in fields}


_SPEC_FIELDS = _fields(("spec",), _SPEC_DEFAULTS)
_RUN_POLICY_PATH: Path = ("spec", "runPolicy")
_RUN_POLICY_FIELDS = {crd: _fields(_RUN_POLICY_PATH, _RUN_POLICY_DEFAULTS + (_CRD_RUN_POLICY_DEFAULTS if crd else ()))
                      for crd in (False, True)}
_REPLICA_FIELDS = tuple((role, ("spec", "mpiReplicaSpecs", role), _fields(("spec", "mpiReplicaSpecs", role), d))
                        for role, d in _REPLICA_DEFAULTS.items())


def missing_defaults(obj: JSONDict, *, crd_run_policy: bool = True) -> list[tuple[Path, Any]]:
    """The defaults an MPIJob dict lacks, as (path from the root, value) pairs.

    A missing or null field counts as unset. A missing parent object is one pair carrying all its
    defaults. Each path always comes with the same value.
    ``crd_run_policy=False`` leaves ``runPolicy.suspend`` to the API server's CRD default,
    so that a value set by another mutating webhook (Kueue) is never contested.
    """
    spec = obj.get("spec")
    if spec is None:
        return [(("spec",), {**_whole(_SPEC_FIELDS), "runPolicy": _whole(_RUN_POLICY_FIELDS[crd_run_policy])})]
    if not isinstance(spec, dict):
        return []  # not an object: validation reports it
    missing = [(path, value) for key, path, value in _SPEC_FIELDS if spec.get(key) is None]
    _add_missing(missing, spec.get("runPolicy"), _RUN_POLICY_PATH, _RUN_POLICY_FIELDS[crd_run_policy])
    replica_specs = spec.get("mpiReplicaSpecs")
    if isinstance(replica_specs, dict):
        for role, path, fields in _REPLICA_FIELDS:
            if role in replica_specs:
                _add_missing(missing, replica_specs[role], path, fields)
    return missing


def _add_missing(missing: list[tuple[Path, Any]], child: Any, path: Path, fields: tuple[Field, ...]) -> None:
    """Append the defaults that ``child``, the object at ``path``, lacks: all of them in one when it is unset."""
    if child is None:
        missing.append((path, _whole(fields)))
    elif isinstance(child, dict):
        missing += [(field_path, value) for key, field_path, value in fields if child.get(key) is None]


def defaults_patch(obj: JSONDict) -> list[JSONDict]:
    """JSON Patch (RFC 6902) ``add`` operations that default an MPIJob without touching set fields.

    ``runPolicy.suspend`` is left to the API server's CRD default, so that a value set by another mutating
    webhook (Kueue) is never contested."""
    missing = missing_defaults(obj, crd_run_policy=False)
    return [{"op": "add", "path": _pointer(path), "value": value} for path, value in missing]


def defaulted_dict(obj: JSONDict) -> JSONDict:
    """A copy of an MPIJob dict with the Go and CRD defaults applied, sharing every unchanged sub-object.

    Only the dicts on the way to a default are copied (pod templates never are), so this is cheap
    enough for every admission request and every sync. Treat the result as read-only.
    """
    result = dict(obj)
    copied = {id(result)}
    for path, value in missing_defaults(obj):
        target = result
        for key in path[:-1]:
            child = target[key]
            if id(child) not in copied:
                child = dict(child)
                target[key] = child
                copied.add(id(child))
            target = child
        target[path[-1]] = value
    return result


def _pointer(path: Path) -> str:
    """A JSON Pointer (RFC 6901): ``("spec", "a/b")`` -> ``/spec/a~1b``."""
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in path)
