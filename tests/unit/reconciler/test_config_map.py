"""The hostfile ConfigMap: upstream's TestNewConfigMap and TestUpdateDiscoverHostsInConfigMap (controller.md 6.1
cases 26 and 27), every row, plus the pod-object form of the Running workers.
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.mpijob.builders import (
    CONFIG_MAP_MAX_BYTES,
    build_config_map,
    build_discover_hosts,
    build_hostfile,
    config_map_size,
    config_map_size_errors,
)
from tests.unit.reconciler.helpers import make_job, owner_ref, replica

OWS = "openmpi-without-slots"
OWS_HOST = f"{OWS}.tenant-a.svc"


def job_for(name: str, namespace: str, implementation: str, launcher_as_worker: bool | None, workers: int,
            slots: int | None) -> Any:
    """A job as upstream's test builds it: no defaulting, only the fields the row names."""
    spec: dict[str, Any] = {"mpiImplementation": implementation,
                            "mpiReplicaSpecs": {"Launcher": replica(), "Worker": replica(replicas=workers)}}
    if launcher_as_worker is not None:
        spec["runLauncherAsWorker"] = launcher_as_worker
    if slots is not None:
        spec["slotsPerWorker"] = slots
    return make_job(name, namespace, defaulted=False, **spec)


NEW_CONFIG_MAP = [
    pytest.param(OWS, "tenant-a", "OpenMPI", True, 2, None, "",
                 f"{OWS}-launcher.{OWS_HOST} slots=1\n{OWS}-worker-0.{OWS_HOST} slots=1\n"
                 f"{OWS}-worker-1.{OWS_HOST} slots=1\n",
                 id="OpenMPI without slots, enable launcher as worker"),
    pytest.param(OWS, "tenant-a", "OpenMPI", True, 2, None, "cluster.local",
                 f"{OWS}-launcher.{OWS_HOST}.cluster.local slots=1\n{OWS}-worker-0.{OWS_HOST}.cluster.local slots=1\n"
                 f"{OWS}-worker-1.{OWS_HOST}.cluster.local slots=1\n",
                 id="OpenMPI with cluster domain, enable launcher as worker"),
    pytest.param(OWS, "tenant-a", "OpenMPI", True, 0, None, "", f"{OWS}-launcher.{OWS_HOST} slots=1\n",
                 id="OpenMPI without slots, zero explicit workers"),
    pytest.param(OWS, "tenant-a", "OpenMPI", None, 2, None, "",
                 f"{OWS}-worker-0.{OWS_HOST} slots=1\n{OWS}-worker-1.{OWS_HOST} slots=1\n",
                 id="OpenMPI without slots, disable launcher as worker"),
    pytest.param("openmpi-with-slots", "tenant-a", "OpenMPI", None, 1, 10, "",
                 "openmpi-with-slots-worker-0.openmpi-with-slots.tenant-a.svc slots=10\n", id="OpenMPI with slots"),
    pytest.param("openmpi-with-slots", "tenant-a", "OpenMPI", None, 1, None, "cluster.local",
                 "openmpi-with-slots-worker-0.openmpi-with-slots.tenant-a.svc.cluster.local slots=1\n",
                 id="OpenMPI with cluster domain"),
    pytest.param("intelmpi-with-slots", "project-x", "Intel", None, 1, 10, "",
                 "intelmpi-with-slots-worker-0.intelmpi-with-slots.project-x.svc:10\n", id="IntelMPI with slots"),
    pytest.param("intelmpi-with-slots", "project-x", "Intel", None, 1, None, "cluster.local",
                 "intelmpi-with-slots-worker-0.intelmpi-with-slots.project-x.svc.cluster.local:1\n",
                 id="IntelMPI with cluster domain"),
    pytest.param("mpich-with-slots", "project-x", "MPICH", None, 1, 10, "",
                 "mpich-with-slots-worker-0.mpich-with-slots.project-x.svc:10\n", id="MPICH with slots"),
    pytest.param("mpich-with-slots", "project-x", "MPICH", None, 1, None, "cluster.local",
                 "mpich-with-slots-worker-0.mpich-with-slots.project-x.svc.cluster.local:1\n",
                 id="MPICH with cluster domain"),
]


@pytest.mark.parametrize(
    ("name", "namespace", "implementation", "launcher_as_worker", "workers", "slots", "cluster_domain", "hostfile"),
    NEW_CONFIG_MAP,
)
def test_new_config_map(name: str, namespace: str, implementation: str, launcher_as_worker: bool | None,
                        workers: int, slots: int | None, cluster_domain: str, hostfile: str) -> None:
    job = job_for(name, namespace, implementation, launcher_as_worker, workers, slots)
    assert build_hostfile(job, cluster_domain) == hostfile
    discover = "#!/bin/sh\n" + (hostfile.splitlines()[0].replace(" slots=1", "").join(("echo ", "\n"))
                                if launcher_as_worker else "")
    assert build_config_map(job, cluster_domain) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-config", "namespace": namespace, "labels": {"app": name},
                     "ownerReferences": [owner_ref(name)]},
        "data": {"hostfile": hostfile, "discover_hosts.sh": discover},
    }


def test_hostfile_without_worker_spec_is_empty() -> None:
    job = make_job("j", "ns", mpiReplicaSpecs={"Launcher": replica()})
    assert build_hostfile(job) == ""


def echo(*hosts: str) -> str:
    return "#!/bin/sh\n" + "".join(f"echo {host}\n" for host in hosts)


TJ = "test-job"
DEFAULT_HOST = f"{TJ}.default.svc"
TENANT_HOST = f"{TJ}.tenant-a.svc.cluster.local"

DISCOVER_HOSTS = [
    pytest.param("default", None, [], "", echo(),
                 id="no cluster domain, launcher as worker disabled, no running pods"),
    pytest.param("default", None, [f"{TJ}-worker-0", f"{TJ}-worker-1"], "",
                 echo(f"{TJ}-worker-0.{DEFAULT_HOST}", f"{TJ}-worker-1.{DEFAULT_HOST}"),
                 id="no cluster domain, launcher as worker disabled, with running pods"),
    pytest.param("default", True, [], "", echo(f"{TJ}-launcher.{DEFAULT_HOST}"),
                 id="no cluster domain, launcher as worker enabled, no running pods"),
    pytest.param("default", True, [f"{TJ}-worker-0", f"{TJ}-worker-1"], "",
                 echo(f"{TJ}-launcher.{DEFAULT_HOST}", f"{TJ}-worker-0.{DEFAULT_HOST}",
                      f"{TJ}-worker-1.{DEFAULT_HOST}"),
                 id="no cluster domain, launcher as worker enabled, with running pods"),
    pytest.param("tenant-a", None, [f"{TJ}-worker-0"], "cluster.local", echo(f"{TJ}-worker-0.{TENANT_HOST}"),
                 id="with cluster domain, launcher as worker disabled, with running pods"),
    pytest.param("tenant-a", True, [f"{TJ}-worker-0"], "cluster.local",
                 echo(f"{TJ}-launcher.{TENANT_HOST}", f"{TJ}-worker-0.{TENANT_HOST}"),
                 id="with cluster domain, launcher as worker enabled, with running pods"),
    pytest.param("default", None, [f"{TJ}-worker-2", f"{TJ}-worker-0", f"{TJ}-worker-1"], "",
                 echo(f"{TJ}-worker-0.{DEFAULT_HOST}", f"{TJ}-worker-1.{DEFAULT_HOST}",
                      f"{TJ}-worker-2.{DEFAULT_HOST}"),
                 id="pods are sorted by name"),
    pytest.param("default", None, [f"{TJ}-worker-10", f"{TJ}-worker-2", f"{TJ}-worker-1"], "",
                 echo(f"{TJ}-worker-1.{DEFAULT_HOST}", f"{TJ}-worker-2.{DEFAULT_HOST}",
                      f"{TJ}-worker-10.{DEFAULT_HOST}"),
                 id="workers in index order, as numbers (upstream: as strings)"),
    pytest.param("default", True, [f"{TJ}-worker-11", f"{TJ}-worker-9", f"{TJ}-worker-100"], "",
                 echo(f"{TJ}-launcher.{DEFAULT_HOST}", f"{TJ}-worker-9.{DEFAULT_HOST}",
                      f"{TJ}-worker-11.{DEFAULT_HOST}", f"{TJ}-worker-100.{DEFAULT_HOST}"),
                 id="launcher first, then workers in index order"),
    pytest.param("default", None, [f"{TJ}-worker-3", "other-pod", f"{TJ}-worker-x", f"{TJ}-worker-0"], "",
                 echo(f"{TJ}-worker-0.{DEFAULT_HOST}", f"{TJ}-worker-3.{DEFAULT_HOST}",
                      f"other-pod.{DEFAULT_HOST}", f"{TJ}-worker-x.{DEFAULT_HOST}"),
                 id="names that are not a worker's after the workers, as strings"),
]


@pytest.mark.parametrize(("namespace", "launcher_as_worker", "running", "cluster_domain", "expected"), DISCOVER_HOSTS)
def test_update_discover_hosts(namespace: str, launcher_as_worker: bool | None, running: list[str],
                               cluster_domain: str, expected: str) -> None:
    job = job_for(TJ, namespace, "OpenMPI", launcher_as_worker, 2, None)
    assert build_discover_hosts(job, running, cluster_domain) == expected
    pods = [{"metadata": {"name": name, "namespace": namespace}} for name in running]
    assert build_discover_hosts(job, pods, cluster_domain) == expected
    assert build_config_map(job, cluster_domain, running)["data"]["discover_hosts.sh"] == expected


@pytest.mark.parametrize("implementation", ["OpenMPI", "Intel", "MPICH"])
@pytest.mark.parametrize("launcher_as_worker", [False, True], ids=["workers only", "launcher as worker"])
@pytest.mark.parametrize("workers", [0, 1, 10, 11, 101, 1234])
@pytest.mark.parametrize("domain", ["", "cluster.local"])
def test_largest_config_map_size_counts_what_the_api_server_counts(
        implementation: str, launcher_as_worker: bool, workers: int, domain: str) -> None:
    job = job_for("sized", "tenant-a", implementation, launcher_as_worker, workers, 12)
    every_worker_running = [f"sized-worker-{i}" for i in range(workers)]
    data = build_config_map(job, domain, every_worker_running)["data"]
    assert config_map_size(job, domain) == sum(len(key) + len(value) for key, value in data.items())


def test_config_map_size_errors_only_past_the_limit() -> None:
    def workers(replicas: int) -> Any:
        return make_job("pi", "default", mpiReplicaSpecs={"Launcher": replica(), "Worker": replica(replicas=replicas)})

    fits = max(n for n in range(10_000, 20_000) if config_map_size(workers(n)) <= CONFIG_MAP_MAX_BYTES)
    assert config_map_size_errors(workers(fits)) == []
    [error] = config_map_size_errors(workers(fits + 1))
    assert str(error) == (
        f"spec.mpiReplicaSpecs[Worker].replicas: Invalid value: {fits + 1}: the hostfile and discover_hosts.sh of "
        f'ConfigMap "pi-config" would need {config_map_size(workers(fits + 1))} bytes, more than the '
        f"1048576 bytes a ConfigMap can hold; at most {fits} workers fit with these names")


def test_the_hostfile_follows_every_input_when_built_again() -> None:
    """The hostfile is cached by its inputs: changing any one of them, and going back, gives the right text."""
    shapes = [(OWS, "tenant-a", "OpenMPI", True, 2, None, ""), (OWS, "tenant-b", "OpenMPI", True, 2, None, ""),
              (OWS, "tenant-a", "Intel", True, 2, None, ""), (OWS, "tenant-a", "OpenMPI", False, 2, None, ""),
              (OWS, "tenant-a", "OpenMPI", True, 3, None, ""), (OWS, "tenant-a", "OpenMPI", True, 2, 4, ""),
              (OWS, "tenant-a", "OpenMPI", True, 2, None, "cluster.local")]
    first = [build_hostfile(job_for(*shape[:6]), shape[6]) for shape in shapes]
    assert len(set(first)) == len(shapes)
    assert first[0] == (f"{OWS}-launcher.{OWS_HOST} slots=1\n{OWS}-worker-0.{OWS_HOST} slots=1\n"
                        f"{OWS}-worker-1.{OWS_HOST} slots=1\n")
    again = [build_hostfile(job_for(*shape[:6]), shape[6]) for shape in reversed(shapes)]
    assert again == list(reversed(first))


@pytest.mark.parametrize("launcher_as_worker", [None, True], ids=["workers only", "launcher as worker"])
@pytest.mark.parametrize("workers", [1, 10, 11, 12, 101])
def test_discover_hosts_lists_the_hostfile_hosts_in_the_same_order(launcher_as_worker: bool | None,
                                                                   workers: int) -> None:
    """Once every worker runs, discover_hosts.sh names the hostfile's hosts in the hostfile's order (the order in
    which mpirun and Horovod hand out ranks), whatever order the pods come in."""
    job = job_for(TJ, "default", "OpenMPI", launcher_as_worker, workers, None)
    running = [f"{TJ}-worker-{i}" for i in range(workers)]
    running = running[1::2] + running[::2][::-1]  # an order of neither kind
    hostfile_hosts = [line.split(" ")[0] for line in build_hostfile(job).splitlines()]
    assert build_discover_hosts(job, running).splitlines() == ["#!/bin/sh", *(f"echo {h}" for h in hostfile_hosts)]
    assert len(hostfile_hosts) == workers + (1 if launcher_as_worker else 0)
