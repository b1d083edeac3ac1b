"""``python -m reconciler render --explain-topology``: which MPI rank goes to which Kueue topology domain.

Kueue's Topology Aware Scheduling ranks the pods of each PodSet by their ``training.kubeflow.org/replica-index``
label minus the PodSet's offset (Kueue v0.19 ``pkg/controller/tas/topology_ungater.go``) and gives rank ``r`` the
``r``-th pod slot of the PodSet's topology assignment: consecutive ranks fill one domain before the next. Any
missing, duplicate or out-of-range rank sends the whole PodSet to greedy placement. ``mpirun`` gives MPI ranks in
hostfile order, ``slotsPerWorker`` per host. This module lines the two up for a job, from the pods the builders
make, and, given the job's admitted Workload, names each rank's domain. Pure: no cluster.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.mpijob.builders import build_launcher_pod_template, build_worker
from reconciler.mpijob.builders.job_facts import runs_launcher_as_worker, slots_per_worker, worker_replicas
from shared.api import constants as c
from shared.api import kueue_topology as kt
from shared.api import names
from shared.api.types import MPIJob
from shared.jsondict import JSONDict


@dataclass(frozen=True)
class PodRank:
    """One pod: its PodSet, its index label, Kueue's rank for it (None: not ranked) and its MPI ranks."""

    pod: str
    podset: str
    replica_index: str | None
    rank: int | None
    mpi_ranks: range | None
    domain: str | None = None


@dataclass(frozen=True)
class PodSetRanks:
    """How Kueue ranks one PodSet: its request, its offset, and why it falls back to greedy placement, if it does."""

    name: str
    count: int
    request: str
    offset: int
    offset_from: str
    fallback: str | None
    pods: list[PodRank]


def explain(job: MPIJob, workload: JSONDict | None = None) -> list[PodSetRanks]:
    """Kueue's ranking of the job's PodSets (Launcher, then Worker), with the domains of ``workload``'s admission."""
    sets = kt.podsets(job)
    offsets = _group_offsets(sets)
    result = []
    for podset in sets:
        pods = list(_pods(job, podset))
        offset, offset_from = offsets.get(podset.name, (0, ""))
        own, own_from = _offset_annotation(job, podset)
        offset, offset_from = offset + own, ", ".join(filter(None, [offset_from, own_from]))
        ranks, fallback = _ranks(pods, podset.count, offset)
        domains = _domains(workload, podset.name)
        if domains is not None and fallback is None and len(domains) < podset.count:
            fallback = f"the assignment has {len(domains)} pod slots for {podset.count} pods"
        placed = [PodRank(pod, podset.name, index, None if fallback else rank, mpi,
                          domains[rank] if domains is not None and rank is not None and not fallback
                          and rank < len(domains) else None)
                  for (pod, index, mpi), rank in zip(pods, ranks, strict=True)]
        result.append(PodSetRanks(podset.name, podset.count, _request(podset), offset, offset_from, fallback, placed))
    return result


def _pods(job: MPIJob, podset: kt.PodSet) -> Iterator[tuple[str, str | None, range | None]]:
    """(pod, replica-index label, MPI ranks) of the PodSet's pods, from the objects the reconciler creates."""
    slots = slots_per_worker(job)
    first_worker_line = 1 if runs_launcher_as_worker(job) else 0
    if podset.replica_type == c.LAUNCHER:
        labels = build_launcher_pod_template(job)["metadata"]["labels"]
        mpi = range(0, slots) if runs_launcher_as_worker(job) else None
        yield names.launcher_name(job.name), labels.get(c.LABEL_REPLICA_INDEX), mpi
        return
    for i in range(worker_replicas(job)):
        labels = build_worker(job, i)["metadata"]["labels"]
        line = first_worker_line + i
        yield names.worker_name(job.name, i), labels.get(c.LABEL_REPLICA_INDEX), range(line * slots,
                                                                                       (line + 1) * slots)


def _group_offsets(sets: Sequence[kt.PodSet]) -> dict[str, tuple[int, str]]:
    """A PodSet group of two: the smaller PodSet (the first on a tie) ranks from 0, the larger after it."""
    if len(sets) != 2 or sets[0].group is None or sets[0].group != sets[1].group:
        return {}
    smaller, larger = (sets[1], sets[0]) if sets[0].count > sets[1].count else (sets[0], sets[1])
    return {smaller.name: (0, ""),
            larger.name: (smaller.count, f"{smaller.count} from PodSet group {sets[0].group!r}")}


def _offset_annotation(job: MPIJob, podset: kt.PodSet) -> tuple[int, str]:
    """The PodSet's ``kueue.x-k8s.io/pod-index-offset``: the one Kueue's webhook sets ("1" on the Worker
    template with runLauncherAsWorker, unless the launcher is in a PodSet group), else the template's."""
    if podset.replica_type == c.WORKER and runs_launcher_as_worker(job) and len(kt.podsets(job)) == 2:
        launcher = kt.podsets(job)[0]
        if kt.GROUP not in launcher.annotations:
            return 1, f"1 from {kt.POD_INDEX_OFFSET} (set by Kueue's webhook with runLauncherAsWorker)"
    value = podset.annotations.get(kt.POD_INDEX_OFFSET)
    if value is None:
        return 0, ""
    try:
        return int(value), f"{value} from {kt.POD_INDEX_OFFSET}"
    except ValueError:
        return 0, f"{kt.POD_INDEX_OFFSET} {value!r} unreadable: Kueue stops ungating the job"


def _ranks(pods: Sequence[tuple[str, str | None, range | None]], count: int,
           offset: int) -> tuple[list[int | None], str | None]:
    """Kueue's ``readRanksForLabels``: the rank of each pod, or why the PodSet is placed greedily."""
    ranks: list[int | None] = []
    seen: dict[int, str] = {}
    for pod, label, _ in pods:
        if label is None or not label.isascii() or not label.isdigit() or int(label) >= count + offset:
            return [None] * len(pods), f"{pod} has no usable {c.LABEL_REPLICA_INDEX} ({label!r})"
        rank = int(label) - offset
        if rank < 0:
            return [None] * len(pods), f"rank {rank} of {pod} is below 0"
        if rank >= count:
            return [None] * len(pods), f"rank {rank} of {pod} exceeds the PodSet size {count}"
        if rank in seen:
            return [None] * len(pods), f"{pod} and {seen[rank]} share rank {rank}"
        seen[rank] = pod
        ranks.append(rank)
    return ranks, None


def _request(podset: kt.PodSet) -> str:
    for key, word in ((kt.REQUIRED, "required"), (kt.PREFERRED, "preferred")):
        if key in podset.annotations:
            slices = (f", slices of {podset.annotations.get(kt.SLICE_SIZE, '?')} in "
                      f"{podset.annotations[kt.SLICE_REQUIRED]}" if kt.SLICE_REQUIRED in podset.annotations else "")
            return f"{word} {podset.annotations[key]}{slices}"
    if kt.UNCONSTRAINED in podset.annotations:
        return "unconstrained"
    return "none (unconstrained when its flavor has a topology)"


def _domains(workload: JSONDict | None, podset: str) -> list[str] | None:
    """The domain of each pod slot of the PodSet's topology assignment in ``workload``, in rank order."""
    if workload is None:
        return None
    admission = (workload.get("status") or {}).get("admission") or {}
    for assignment in admission.get("podSetAssignments") or []:
        if assignment.get("name") == podset and assignment.get("topologyAssignment"):
            return list(expand_assignment(assignment["topologyAssignment"]))
    return None


def expand_assignment(assignment: JSONDict) -> Iterator[str]:
    """One ``level=value,...`` per pod slot of a Kueue v1beta2 TopologyAssignment, domain by domain, as Kueue's
    ``rankToDomainID`` lays them out (``pkg/util/tas/tas_assignment.go``: universal or prefix+root+suffix values,
    universal or individual pod counts)."""
    levels = assignment.get("levels") or []
    for piece in assignment.get("slices") or []:
        counts = piece.get("podCounts") or {}
        for i in range(int(piece.get("domainCount") or 0)):
            values = [_value_at(level_values, i) for level_values in piece.get("valuesPerLevel") or []]
            count = counts["universal"] if counts.get("universal") is not None else counts["individual"][i]
            domain = ",".join(f"{level}={value}" for level, value in zip(levels, values, strict=True))
            for _ in range(int(count)):
                yield domain


def _value_at(values: dict[str, Any], index: int) -> str:
    if values.get("universal") is not None:
        return str(values["universal"])
    individual = values["individual"]
    return f"{individual.get('prefix') or ''}{individual['roots'][index]}{individual.get('suffix') or ''}"


def render_text(job: MPIJob, podsets: Sequence[PodSetRanks]) -> str:
    """The explanation as ``render --explain-topology`` prints it: a paragraph per PodSet, then one line per pod."""
    slots = slots_per_worker(job)
    lines = [f"MPIJob {job.namespace}/{job.name}: mpirun gives MPI ranks in hostfile order, {slots} per host"
             + (", the launcher first (runLauncherAsWorker)" if runs_launcher_as_worker(job) else "")]
    for podset in podsets:
        offset = f"replica-index minus {podset.offset}" + (f" ({podset.offset_from})" if podset.offset_from else "")
        how = (f"NOT by rank, greedily: {podset.fallback}" if podset.fallback
               else f"rank = {offset}; rank r takes the r-th pod slot of the assignment")
        lines.append(f"PodSet {podset.name}: {podset.count} pod(s), topology {podset.request}; placed {how}")
    rows = [("POD", "PODSET", "REPLICA-INDEX", "KUEUE-RANK", "MPI-RANKS", "DOMAIN")]
    for podset in podsets:
        rows += [(pod.pod, pod.podset, pod.replica_index or "-", "-" if pod.rank is None else str(pod.rank),
                  _ranks_text(pod.mpi_ranks), pod.domain or ("-" if pod.rank is None else f"slot {pod.rank}"))
                 for pod in podset.pods]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines) + "\n"


def _ranks_text(ranks: range | None) -> str:
    if ranks is None or not ranks:
        return "-"
    return str(ranks.start) if len(ranks) == 1 else f"{ranks.start}-{ranks.stop - 1}"
