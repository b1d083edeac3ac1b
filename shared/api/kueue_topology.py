"""Kueue's Topology Aware Scheduling requests on an MPIJob's pod templates: what Kueue's MPIJob webhook refuses,
refused here first with Kueue's field paths and messages, and where Kueue would silently drop rank-based placement.

Kueue v0.19's ``mpijob_webhook.go`` ``validateTopologyRequest`` runs, for each PodSet (Launcher, then Worker, as
``orderedReplicaTypes``), ``jobframework.ValidateTASPodSetRequest`` and ``ValidateSliceSizeAnnotationUpperBound``,
then ``ValidatePodSetGroupingTopology`` over both, with Kueue's default feature gates (``TopologyAwareScheduling``
and ``TASMultiLayerTopology`` on). The annotations are Kueue's own (``kueue.x-k8s.io/``): a job without them gets
no error here. docs/kueue.md lists each rule.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from shared.api import constants as c
from shared.api import dns
from shared.api import field_errors as fe
from shared.api.field_errors import ErrorType, FieldError
from shared.api.types import MPIJob

PREFIX = "kueue.x-k8s.io/"
REQUIRED = PREFIX + "podset-required-topology"
PREFERRED = PREFIX + "podset-preferred-topology"
UNCONSTRAINED = PREFIX + "podset-unconstrained-topology"
SLICE_REQUIRED = PREFIX + "podset-slice-required-topology"
SLICE_SIZE = PREFIX + "podset-slice-size"
SLICE_CONSTRAINTS = PREFIX + "podset-slice-required-topology-constraints"
GROUP = PREFIX + "podset-group-name"
POD_INDEX_OFFSET = PREFIX + "pod-index-offset"
PODSET_LABEL = PREFIX + "podset"
WORKLOAD_ANNOTATION = PREFIX + "workload"
TOPOLOGY_GATE = PREFIX + "topology"
INT32_MAX = 2**31 - 1

_LABEL_KEY = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                  "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
                  f"is '{_LABEL_KEY_FMT}')")


@dataclass(frozen=True)
class PodSet:
    """One of Kueue's PodSets of an MPIJob: its replica type, pod count and template annotations."""

    replica_type: str
    count: int
    annotations: dict[str, str]

    @property
    def name(self) -> str:
        """Kueue's PodSet name (``launcher``, ``worker``): the ``kueue.x-k8s.io/podset`` label of its pods."""
        return self.replica_type.lower()

    @property
    def annotations_path(self) -> str:
        return f"spec.mpiReplicaSpecs[{self.replica_type}].template.metadata.annotations"

    def key_path(self, key: str) -> str:
        return f"{self.annotations_path}[{key}]"

    @property
    def level(self) -> tuple[str, str] | None:
        """(annotation, level) of the required or preferred topology, as Kueue's ``Build`` reads it."""
        for key in (REQUIRED, PREFERRED):
            if key in self.annotations:
                return key, self.annotations[key]
        return None

    @property
    def group(self) -> str | None:
        """The PodSet group, which Kueue honours only with a required or preferred topology."""
        return self.annotations.get(GROUP) if self.level is not None else None


def podsets(job: MPIJob) -> list[PodSet]:
    """Kueue's PodSets of the job: Launcher then Worker, those whose replica spec exists."""
    result = []
    for replica_type in (c.LAUNCHER, c.WORKER):
        spec = job.replica_spec(replica_type)
        if spec is None:
            continue
        template = spec.template if isinstance(spec.template, dict) else {}
        meta = template.get("metadata")
        raw = meta.get("annotations") if isinstance(meta, dict) else None
        raw = raw if isinstance(raw, dict) else {}
        annotations = {str(k): str(v) for k, v in raw.items() if isinstance(v, str)}
        result.append(PodSet(replica_type, 1 if spec.replicas is None else spec.replicas, annotations))
    return result


def uses_topology(job: MPIJob) -> bool:
    """Whether a template asks Kueue for a topology (any of its TAS annotations)."""
    keys = {REQUIRED, PREFERRED, UNCONSTRAINED, SLICE_REQUIRED, SLICE_SIZE, SLICE_CONSTRAINTS, GROUP}
    return any(keys & podset.annotations.keys() for podset in podsets(job))


def kueue_topology_errors(job: MPIJob) -> list[FieldError]:
    """The errors Kueue's MPIJob webhook returns for the job's topology annotations, sorted by field as Kueue
    sorts them."""
    sets = podsets(job)
    errors = [error for podset in sets for error in _podset_errors(podset) + _slice_size_bound_errors(podset)]
    errors += _grouping_errors(sets)
    return sorted(errors, key=lambda error: error.field)


def kueue_topology_warnings(job: MPIJob) -> list[str]:
    """Combinations Kueue accepts but then places without the ranks: a PodSet group of launcher and workers
    without runLauncherAsWorker (workers are indexed from 0, the group's ranks from 1)."""
    sets = {podset.replica_type: podset for podset in podsets(job)}
    launcher, worker = sets.get(c.LAUNCHER), sets.get(c.WORKER)
    launcher_as_worker = job.spec is not None and job.spec.run_launcher_as_worker is True
    if launcher is None or worker is None or launcher_as_worker or launcher.group is None:
        return []
    if launcher.group != worker.group:
        return []
    return [f"{worker.key_path(GROUP)}: a PodSet group of the launcher and the workers without runLauncherAsWorker: "
            "Kueue ranks worker i as i-1 and, finding rank -1, places the workers without their ranks; set "
            "runLauncherAsWorker: true or drop the group"]


def _podset_errors(podset: PodSet) -> list[FieldError]:
    """``ValidateTASPodSetRequest``."""
    found = podset.annotations
    path = podset.annotations_path
    errors = []
    if sum(key in found for key in (REQUIRED, PREFERRED, UNCONSTRAINED)) > 1:
        errors.append(fe.invalid(path, fe.OMITTED, "must not contain more than one topology annotation: "
                                 f'["{REQUIRED}", "{PREFERRED}", "{UNCONSTRAINED}"]'))
    for key in (REQUIRED, PREFERRED, SLICE_REQUIRED):
        if key in found:
            errors += label_key_errors(found[key], podset.key_path(key))
    if GROUP in found:
        errors += _group_name_errors(podset)
    if UNCONSTRAINED in found and _parse_bool(found[UNCONSTRAINED]) is None:
        errors.append(fe.invalid(podset.key_path(UNCONSTRAINED), found[UNCONSTRAINED], "must be a boolean value"))
    errors += _slice_size_errors(podset)
    if SLICE_REQUIRED in found and SLICE_SIZE not in found:
        errors.append(fe.required(podset.key_path(SLICE_SIZE), f"must be set when '{SLICE_REQUIRED}' is specified"))
    if SLICE_SIZE in found and SLICE_REQUIRED not in found:
        errors.append(fe.forbidden(podset.key_path(SLICE_SIZE), f"may not be set when '{SLICE_REQUIRED}' is not "
                                   "specified"))
    return errors + _constraints_errors(podset)


def _group_name_errors(podset: PodSet) -> list[FieldError]:
    found, key = podset.annotations, podset.key_path(GROUP)
    errors = []
    value = found[GROUP]
    significant = value.lstrip("0") or "0"
    if value.isascii() and value.isdigit() and len(significant) <= 20 and int(significant) < 2**64:  # ParseUint
        errors.append(fe.invalid(key, value, "must not be a number"))
    for other in (SLICE_SIZE, SLICE_REQUIRED):
        if other in found:
            errors.append(fe.forbidden(key, f"may not be set when '{other}' is specified"))
    if PREFERRED not in found and REQUIRED not in found:
        errors.append(fe.forbidden(key, f"may not be set when neither '{PREFERRED}' nor '{REQUIRED}' is specified"))
    return errors


def _slice_size_errors(podset: PodSet) -> list[FieldError]:
    value = podset.annotations.get(SLICE_SIZE)
    if value is None:
        return []
    size = _parse_int32(value)
    if size is None:
        return [fe.invalid(podset.key_path(SLICE_SIZE), value, "must be a numeric value")]
    if size < 1:
        return [fe.invalid(podset.key_path(SLICE_SIZE), value, "must be greater than or equal to 1")]
    return []


def _slice_size_bound_errors(podset: PodSet) -> list[FieldError]:
    """``ValidateSliceSizeAnnotationUpperBound``: no slice larger than the PodSet."""
    errors = []
    value = podset.annotations.get(SLICE_SIZE)
    if value is not None:
        size = _parse_int32(value)
        if size is None:
            return [fe.invalid(podset.key_path(SLICE_SIZE), value, "must be a numeric value")]
        if size > podset.count:
            errors.append(fe.invalid(podset.key_path(SLICE_SIZE), value,
                                     f"must not be greater than pod set count {podset.count}"))
    constraints = _constraints(podset.annotations.get(SLICE_CONSTRAINTS))
    if constraints and constraints[0]["size"] > podset.count:
        errors.append(fe.invalid(podset.key_path(SLICE_CONSTRAINTS), constraints[0]["size"],
                                 f"must not be greater than pod set count {podset.count}"))
    return errors


def _constraints_errors(podset: PodSet) -> list[FieldError]:
    """``validateSliceRequiredTopologyConstraintsAnnotation`` (TASMultiLayerTopology, on by default in v0.19)."""
    found = podset.annotations
    if SLICE_CONSTRAINTS not in found:
        return []
    path = podset.key_path(SLICE_CONSTRAINTS)
    errors = [fe.forbidden(path, f"may not be set when '{other}' is specified")
              for other in (SLICE_REQUIRED, SLICE_SIZE) if other in found]
    if GROUP in found:
        errors.append(fe.forbidden(podset.key_path(GROUP), f"may not be set when '{SLICE_CONSTRAINTS}' is specified"))
    constraints = _constraints(found[SLICE_CONSTRAINTS])
    if constraints is None:
        return [*errors, fe.invalid(path, found[SLICE_CONSTRAINTS], "must be a valid JSON array of "
                                    '{"topology": string, "size": int32} objects')]
    if not 1 <= len(constraints) <= 3:
        return [*errors, fe.invalid(path, found[SLICE_CONSTRAINTS],
                                    "topology constraints must contain between 1 and 3 entries")]
    seen: dict[str, int] = {}
    for i, entry in enumerate(constraints):
        topology, size = entry["topology"], entry["size"]
        errors += label_key_errors(topology, f"{path}[{i}].topology")
        if size < 1:
            errors.append(fe.invalid(f"{path}[{i}].size", size, "must be greater than or equal to 1"))
    for i, entry in enumerate(constraints):
        topology = entry["topology"]
        if topology in seen:
            errors.append(FieldError(ErrorType.DUPLICATE, f"{path}[{i}].topology",
                                     f"{topology} (also at index {seen[topology]})"))
        else:
            seen[topology] = i
    for i in range(1, len(constraints)):
        parent, size = constraints[i - 1]["size"], constraints[i]["size"]
        if size > 0 and parent % size != 0:
            errors.append(fe.invalid(f"{path}[{i}].size", size, f"must evenly divide the parent layer size {parent}"))
    return errors


def _grouping_errors(sets: list[PodSet]) -> list[FieldError]:
    """``ValidatePodSetGroupingTopology``: a group is exactly two PodSets with the same topology, one of one pod."""
    groups: dict[str, list[PodSet]] = {}
    for podset in sets:
        if podset.group is not None:
            groups.setdefault(podset.group, []).append(podset)
    errors = []
    for name, members in groups.items():
        if len(members) != 2:
            errors += [fe.invalid(m.key_path(GROUP), name, f"can only define groups of exactly 2 pod sets, got: "
                                  f"{len(members)} pod set(s)") for m in members]
            continue
        first, second = members
        if first.count != 1 and second.count != 1:
            detail = (f"can only define groups where at least one pod set has only 1 replica, got: {first.count} "
                      f"replica(s) and {second.count} replica(s) in the group")
            errors += [fe.invalid(m.key_path(GROUP), name, detail) for m in members]
        if first.level != second.level:
            template = (f"must specify '{REQUIRED}' or '{PREFERRED}' topology consistent with '{{}}' in group "
                        f"'{name}'")
            errors += [fe.invalid(first.annotations_path, fe.OMITTED, template.format(second.annotations_path)),
                       fe.invalid(second.annotations_path, fe.OMITTED, template.format(first.annotations_path))]
    return errors


def label_key_errors(value: str, path: str) -> list[FieldError]:
    """``metav1validation.ValidateLabelName``: a label key (``[prefix/]name``), with apimachinery's messages."""
    return [fe.invalid(path, value, message, "format=k8s-label-key") for message in _label_key_problems(value)]


def _label_key_problems(value: str) -> list[str]:
    parts = value.split("/")
    if len(parts) > 2:
        return [f"a valid label key {_LABEL_KEY_MSG} with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    problems = []
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            problems.append("prefix part must be non-empty")
        else:
            problems += [f"prefix part {message}" for message in dns.is_dns1123_subdomain(parts[0])]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _LABEL_KEY.fullmatch(name):
        problems.append(f"name part {_LABEL_KEY_MSG}")
    return problems


def _parse_bool(value: str) -> bool | None:
    """Go's ``strconv.ParseBool``."""
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def _parse_int32(value: str) -> int | None:
    """Go's ``strconv.ParseInt(value, 10, 32)``: an optional sign and decimal digits, within int32."""
    digits = value[1:] if value[:1] in ("+", "-") else value
    if not digits or not digits.isascii() or not digits.isdigit() or len(digits.lstrip("0")) > 10:
        return None
    number = int(digits.lstrip("0") or "0") * (-1 if value.startswith("-") else 1)
    return number if -INT32_MAX - 1 <= number <= INT32_MAX else None


def _constraints(text: str | None) -> list[dict[str, Any]] | None:
    """The multi-layer constraints as Go's ``json.Unmarshal`` into ``[]PodsetSliceRequiredTopologyConstraint``
    reads them (None when it would fail; a JSON null is an empty list, a null entry or field its zero value)."""
    try:
        value = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        return None
    if text is None or not isinstance(value, list | None):
        return None
    entries = [_constraint(entry) for entry in value or []]
    return None if any(entry is None for entry in entries) else [e for e in entries if e is not None]


def _constraint(entry: Any) -> dict[str, Any] | None:
    entry = {} if entry is None else entry
    if not isinstance(entry, dict):
        return None
    topology = entry.get("topology") or ""
    size = entry.get("size") or 0
    if not isinstance(topology, str) or isinstance(size, bool) or not isinstance(size, int):
        return None
    return {"topology": topology, "size": size} if -INT32_MAX - 1 <= size <= INT32_MAX else None
