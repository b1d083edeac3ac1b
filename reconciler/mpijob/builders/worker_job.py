"""The worker Job ``<job>-worker`` of the IndexedJob worker backend (docs/proposals/indexed-job-workers.md): one
Indexed ``batch/v1`` Job whose pods are the workers, made by the Job controller.

The Job controller names each pod ``<job>-worker-<i>-<random>`` and forces its hostname to ``<job>-worker-<i>``
(the Job's name and the completion index): with ``subdomain: <job>`` (the headless Service), every worker has the
DNS name it has under the Pods backend, so the hostfile is the same, byte for byte. What is per index cannot be
on a template: the replica-index label (``training.kubeflow.org/replica-index``) is added to each pod by the
webhook's pod mutation, from the completion index plus ``REPLICA_INDEX_OFFSET_ANNOTATION``.
"""

from __future__ import annotations

from reconciler.mpijob.builders.child_object import app_labels, object_meta
from reconciler.mpijob.builders.job_facts import runs_launcher_as_worker, worker_replicas
from reconciler.mpijob.builders.pod_template import (
    DNS_CLUSTER_FIRST_WITH_HOST_NET,
    copy_template,
    pod_template_meta,
    set_pod_labels,
)
from reconciler.mpijob.builders.podgroup import GangScheduling, decorate_pod_template
from reconciler.mpijob.builders.worker import set_up_worker_spec
from shared.api import constants as c
from shared.api import names
from shared.api.types import MPIJob
from shared.api.worker_backend import REPLICA_INDEX_OFFSET_ANNOTATION, WORKER_JOB_LABEL, worker_job_name
from shared.jsondict import JSONDict

INDEXED = "Indexed"
POD_REPLACEMENT_FAILED = "Failed"  # a replacement starts only once the pod it replaces is gone: one host per name
# The operator, not the Job controller, decides when the workers have failed (the launcher's outcome, evicted
# workers, the failurePolicy's rules): the Job never fails by its own count of pod failures. The Job controller
# still spaces out the replacements of a pod that keeps failing (its exponential backoff, at most 6 minutes).
NEVER_FAILS = 2**31 - 1


def build_worker_job_template(job: MPIJob, gang: GangScheduling | None = None, *, cluster_domain: str = "") -> JSONDict:
    """The worker template as ``build_worker`` makes each pod, without what is per index: no hostname (the Job
    controller sets it), no replica-index label; the worker-Job label the pod webhook selects on, and the offset it
    adds to the completion index under runLauncherAsWorker (the launcher is rank 0)."""
    template = copy_template(job, c.WORKER)
    set_pod_labels(template, {**names.role_selector(job.name, c.ROLE_WORKER), WORKER_JOB_LABEL: job.name})
    if runs_launcher_as_worker(job):
        meta = template["metadata"]
        meta["annotations"] = {**(meta.get("annotations") or {}), REPLICA_INDEX_OFFSET_ANNOTATION: "1"}
    spec = template["spec"]
    spec.pop("hostname", None)
    spec["subdomain"] = names.service_name(job.name)
    if spec.get("hostNetwork") is True:
        spec["dnsPolicy"] = DNS_CLUSTER_FIRST_WITH_HOST_NET
    set_up_worker_spec(spec, job, cluster_domain)
    if gang is not None:
        decorate_pod_template(template, job.name, gang)
    return {"metadata": pod_template_meta(template), "spec": spec}


def build_worker_job(job: MPIJob, gang: GangScheduling | None = None, *, cluster_domain: str = "") -> JSONDict:
    """Job ``<job>-worker``: Indexed, ``parallelism = completions =`` the worker replicas, pods replaced only once
    failed, a backoff limit it never reaches (``NEVER_FAILS``), labels ``{app: <job>}``, controlled by the MPIJob.
    Never suspended: it is made only for a job that runs, so each resume gets a new Job, and with ``WorkloadWithJob``
    a new gang, sized to the job at that time."""
    replicas = worker_replicas(job)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_meta(job, worker_job_name(job.name), app_labels(job)),  # its pods' hostnames: <name>-<i>
        "spec": {
            "completionMode": INDEXED,
            "completions": replicas,
            "parallelism": replicas,
            "backoffLimit": NEVER_FAILS,
            "podReplacementPolicy": POD_REPLACEMENT_FAILED,
            "template": build_worker_job_template(job, gang, cluster_domain=cluster_domain),
        },
    }


def worker_job_scale_patch(existing: JSONDict, replicas: int) -> JSONDict | None:
    """The merge patch that scales a worker Job to ``replicas`` (``parallelism`` and ``completions`` together, as
    an elastic Indexed Job must change them), or None when it has that size."""
    spec = existing.get("spec") or {}
    if spec.get("parallelism") == replicas and spec.get("completions") == replicas:
        return None
    return {"spec": {"parallelism": replicas, "completions": replicas}}


def parse_indexes(text: object) -> set[int]:
    """The indexes of an Indexed Job's ``status.completedIndexes`` (``"1,3-5"``: ranges and single indexes)."""
    found: set[int] = set()
    for part in text.split(",") if isinstance(text, str) else []:
        first, dash, last = part.strip().partition("-")
        if first.isdigit() and (last.isdigit() or not dash):
            found.update(range(int(first), int(last or first) + 1))
    return found


def format_indexes(indexes: set[int]) -> str:
    """``indexes`` as the Job controller writes them (``orderedIntervals.String``): ascending, a run of three or more
    consecutive indexes as ``first-last``, a run of two as ``first,last``."""
    runs: list[list[int]] = []
    for index in sorted(indexes):
        if runs and runs[-1][1] + 1 == index:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ",".join(str(first) if first == last else f"{first}{',' if last == first + 1 else '-'}{last}"
                    for first, last in runs)


def without_completed_indexes(status: JSONDict, lost: set[int]) -> JSONDict | None:
    """The worker Job's ``status`` with the indexes ``lost`` taken out of ``completedIndexes`` (and ``succeeded``, its
    count, lowered to match), so the Job controller makes a pod for each again; None when it lists none of them."""
    completed = parse_indexes(status.get("completedIndexes"))
    if not completed & lost:
        return None
    left = completed - lost
    return {**status, "completedIndexes": format_indexes(left), "succeeded": len(left)}
