"""MPIJobs for the real node: upstream's pi examples, adapted only where this node needs it, and the
waits and log checks the end-to-end tests share."""

from __future__ import annotations

import contextlib
import copy
import json
import re
import time
from collections import Counter
from collections.abc import Iterator

import yaml

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import CPU_LIMIT, JSON, conditions, diagnostics, launcher_log, wait_finished
from hack.devcluster.operator_deploy import NAMESPACE as OPERATOR_NAMESPACE
from hack.devcluster.operator_deploy import RECONCILER, lease_holder
from hack.devcluster.wait import wait_for
from tests.reference import pi_example

# each MPI we run: upstream's example it comes from, and the image (openmpi4: Open MPI 4 on bookworm)
EXAMPLES = {"openmpi": "pi.yaml", "openmpi4": "pi.yaml", "intel": "pi-intel.yaml", "mpich": "pi-mpich.yaml"}
PI_LINE = re.compile(r"pi is approximately (3\.1\d+)")
RANK_LINE = re.compile(r"Rank (\d+) on host (\S+)")


def _containers(job: JSON) -> list[JSON]:
    return [c for spec in job["spec"]["mpiReplicaSpecs"].values() for c in spec["template"]["spec"]["containers"]]


def upstream_pi(mpi: str, name: str, *, root: bool = False) -> JSON:
    """Upstream's pi example for `mpi` (openmpi, intel, mpich), named `name`, with lower CPU limits and
    images used as present on the node (upstream's `imagePullPolicy: Always` needs a registry).
    `root` turns it into the root variant: no runAsUser, the default sshAuthMountPath (/root/.ssh),
    workers running `/usr/sbin/sshd -De`, Open MPI's mpirun allowed to run as root. `openmpi4` is
    upstream's Open MPI example on the Open MPI 4 image. Without the reference folder, the project's copy of the
    example (examples/pi-*.yaml) stands in for upstream's."""
    job: JSON = yaml.safe_load(pi_example(EXAMPLES[mpi]).read_text())
    job["metadata"]["name"] = name
    job["spec"].setdefault("runPolicy", {}).pop("ttlSecondsAfterFinished", None)
    for container in _containers(job):
        container["resources"]["limits"]["cpu"] = CPU_LIMIT
        container["imagePullPolicy"] = "IfNotPresent"
        container["image"] = f"mpioperator/mpi-pi:{mpi}"
    if root:
        job["spec"].pop("sshAuthMountPath", None)
        for replica, spec in job["spec"]["mpiReplicaSpecs"].items():
            spec["template"]["spec"].pop("securityContext", None)  # where the project's copies set runAsUser
            container = spec["template"]["spec"]["containers"][0]
            container.pop("securityContext", None)
            if replica == "Worker":
                container["command"] = ["/usr/sbin/sshd"] if container.get("command") else None
                container["args"] = ["-De"] if container["command"] else ["/usr/sbin/sshd", "-De"]
            elif mpi.startswith("openmpi"):
                container["args"] = ["--allow-run-as-root", *container["args"]]
    return job


def apply(cluster: LocalCluster, namespace: str, job: JSON) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(job), check=True)


def run_to_success(cluster: LocalCluster, namespace: str, job: JSON, timeout: float = 240) -> tuple[str, float]:
    """Apply `job`, wait until it has Succeeded; returns the launcher's log and the seconds it took."""
    began = time.monotonic()
    apply(cluster, namespace, copy.deepcopy(job))
    outcome, final = wait_finished(cluster, namespace, job["metadata"]["name"], timeout)
    took = time.monotonic() - began
    assert outcome == "Succeeded", f"{conditions(final)}\n{diagnostics(cluster, namespace)}"
    return launcher_log(cluster, namespace, job["metadata"]["name"]), took


def rank_hosts(log: str) -> dict[int, str]:
    """Each rank's host (short name) from the ``Rank N on host H`` lines of pi and netcheck."""
    return {int(r): h.split(".")[0] for r, h in RANK_LINE.findall(log)}


def assert_ranks_on(log: str, hosts: list[str]) -> None:
    """Ranks 0..len(hosts)-1 ran, as many on each host as it appears in `hosts` (a worker with two slots
    appears twice) and none anywhere else: not on the launcher unless it is listed."""
    ranks = rank_hosts(log)
    assert sorted(ranks) == list(range(len(hosts))), log
    assert Counter(ranks.values()) == Counter(hosts), log


def assert_pi(log: str, hosts: list[str]) -> None:
    """The launcher's log has pi to two decimals and the ranks on `hosts` (by short name, see assert_ranks_on)."""
    match = PI_LINE.search(log)
    assert match, f"no pi in the launcher's log:\n{log}"
    assert abs(float(match.group(1)) - 3.14159) < 0.01, log
    assert_ranks_on(log, hosts)


def reconciler_syncs(cluster: LocalCluster, namespace: str, name: str) -> int:
    """How many syncs of the MPIJob the deployed reconciler has logged (its canonical ``msg=sync`` line)."""
    log = cluster.kubectl("logs", "-n", OPERATOR_NAMESPACE, f"deployment/{RECONCILER}", "--tail=-1").stdout
    return log.count(f"msg=sync key={namespace}/{name} ")


def wait_synced_again(cluster: LocalCluster, namespace: str, name: str, after: int, timeout: float = 60) -> None:
    """Until the reconciler has synced the MPIJob more than ``after`` times: an absence checked afterwards
    is proven by a sync that saw the job, not by a guess at how long one takes."""
    wait_for(lambda: reconciler_syncs(cluster, namespace, name) > after, timeout=timeout, interval=0.5,
             what=f"another sync of {namespace}/{name}")


def _rolled_out(cluster: LocalCluster, flag: str, with_flag: bool) -> bool:
    """The reconciler's Deployment rolled out: one Running pod, with (or without) `flag`, holding the Lease."""
    dep = cluster.rest.get(f"/apis/apps/v1/namespaces/{OPERATOR_NAMESPACE}/deployments/{RECONCILER}")
    status = dep.get("status") or {}
    pods = cluster.rest.get(f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/pods"
                            f"?labelSelector=app.kubernetes.io/name={RECONCILER}")
    running = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")
               and (p.get("status") or {}).get("phase") == "Running"
               and (flag in p["spec"]["containers"][0].get("args", [])) == with_flag]
    return (status.get("updatedReplicas") == status.get("replicas") == status.get("availableReplicas") == 1
            and status.get("observedGeneration") == dep["metadata"]["generation"] and len(running) == len(
                pods["items"]) == 1 and lease_holder(cluster).startswith(running[0]["metadata"]["name"]))


def _set_reconciler_flag(cluster: LocalCluster, flag: str, on: bool) -> None:
    dep = cluster.rest.get(f"/apis/apps/v1/namespaces/{OPERATOR_NAMESPACE}/deployments/{RECONCILER}")
    args = [a for a in dep["spec"]["template"]["spec"]["containers"][0].get("args", []) if a != flag]
    patch = [{"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": [*args, flag] if on else args}]
    cluster.kubectl("-n", OPERATOR_NAMESPACE, "patch", "deployment", RECONCILER, "--type=json",
                    "-p", json.dumps(patch), check=True)
    state = "with" if on else "without"
    wait_for(lambda: _rolled_out(cluster, flag, on), 120, 0.5,
             what=f"the reconciler rolled out {state} {flag}, leading")


@contextlib.contextmanager
def reconciler_flag(cluster: LocalCluster, flag: str) -> Iterator[None]:
    """The deployed reconciler with `flag` added to its container's args, as an admin would edit the
    Deployment (a rolling update), and without it again afterwards."""
    _set_reconciler_flag(cluster, flag, True)
    try:
        yield
    finally:
        _set_reconciler_flag(cluster, flag, False)
