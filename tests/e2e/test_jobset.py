"""The way out to JobSet, on the real node: upstream's pi examples (Open MPI, Intel MPI, MPICH) rendered by
``python -m reconciler render --as jobset`` and applied as they are run under a real JobSet controller (v0.12.0,
built from the Go module proxy by hack/build/build-jobset.sh, its webhooks registered) with no MPIJob involved: the
JobSet completes, the launcher's log has pi computed by ranks on the two workers (hostnames ``pi-worker-0-<i>``),
and JobSet deletes the workers' Job once the launcher has completed."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from hack.devcluster import HarnessError
from hack.devcluster.jobset import JobSetController, JobSetUnavailableError, find_jobset
from hack.devcluster.mpijobs import diagnostics
from hack.devcluster.realnode import RealNodeCluster
from hack.devcluster.rest import JSON, condition
from hack.devcluster.wait import wait_for
from tests.e2e.jobs import assert_pi, upstream_pi

REPO_ROOT = Path(__file__).resolve().parents[2]
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets"


@pytest.fixture(scope="module")
def jobset_controller(real_cluster: RealNodeCluster, tmp_path_factory: pytest.TempPathFactory,
                      pytestconfig: pytest.Config) -> Iterator[JobSetController]:
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    try:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():  # the build progress
            build = find_jobset()
    except JobSetUnavailableError as err:
        pytest.skip(str(err))
    except HarnessError as err:
        pytest.fail(f"the JobSet controller was not built: {err}", pytrace=False)
    controller = JobSetController(real_cluster, tmp_path_factory.mktemp("jobset"), build)
    try:
        controller.install_crd()
        controller.start()
        controller.wait_ready()
        controller.register()
        yield controller
    except HarnessError as err:
        pytest.fail(f"the JobSet controller did not start: {err}\n{controller.tail()}", pytrace=False)
    finally:
        controller.stop()


def render_as_jobset(job: JSON) -> str:
    result = subprocess.run([sys.executable, "-m", "reconciler", "render", "--as", "jobset", "-"],
                            input=yaml.safe_dump(job), capture_output=True, text=True, cwd=REPO_ROOT, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def finished(cluster: RealNodeCluster, namespace: str, name: str) -> JSON | None:
    jobset: JSON = cluster.rest.get(f"{JOBSETS.format(namespace=namespace)}/{name}")
    done = "True" in (condition(jobset, "Completed"), condition(jobset, "Failed"))
    return jobset if done else None


@pytest.mark.parametrize("mpi", ["openmpi", "intel", "mpich"])
def test_rendered_jobset_computes_pi(real_cluster: RealNodeCluster, namespace: str,
                                     jobset_controller: JobSetController, mpi: str) -> None:
    job = upstream_pi(mpi, "pi")
    job["metadata"]["namespace"] = namespace
    real_cluster.kubectl("apply", "-f", "-", input=render_as_jobset(job), check=True)

    final = wait_for(lambda: finished(real_cluster, namespace, "pi"), timeout=240, interval=1,
                     what="the JobSet finished")
    assert final is not None  # wait_for returns a truthy value
    assert condition(final, "Completed") == "True", (
        f"{final.get('status')}\n{diagnostics(real_cluster, namespace)}\n{jobset_controller.tail()}")
    log = real_cluster.kubectl("logs", "-n", namespace, "job/pi-launcher-0", "--tail=-1", check=True).stdout
    assert_pi(log, ["pi-worker-0-0", "pi-worker-0-1"])

    def workers_gone() -> bool:
        jobs = real_cluster.kubectl("get", "jobs", "-n", namespace, "-o", "name", check=True).stdout.split()
        return jobs == ["job.batch/pi-launcher-0"]

    wait_for(workers_gone, timeout=60, interval=0.5, what="JobSet deleting the workers' Job")
