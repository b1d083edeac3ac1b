"""``python -m reconciler render --as jobset|trainjob`` against the real CRDs: JobSet v0.12.0's and Kubeflow Trainer
v2.3.0's (from their Go modules, nothing built), installed in the local control plane; every export of upstream's pi
examples (or the project's copies) passes the API server's schema and CEL validation in a server-side dry run, and
an object the schema refuses is refused (so the dry run does validate). The JobSet webhook's own checks run in the
real-node test (tests/e2e/test_jobset.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hack.devcluster import HarnessError, LocalCluster
from hack.devcluster.gomodules import GoUnavailableError
from hack.devcluster.jobset import export_crds, install_crds
from tests.reference import pi_example

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def crds(cluster: LocalCluster) -> None:
    try:
        paths = export_crds()
    except GoUnavailableError as err:
        pytest.skip(str(err))
    except HarnessError as err:
        pytest.fail(str(err), pytrace=False)
    install_crds(cluster, paths)


def exported(target: str, path: Path, namespace: str) -> list[dict[str, object]]:
    job = yaml.safe_load(path.read_text())
    job["metadata"]["namespace"] = namespace
    result = subprocess.run([sys.executable, "-m", "reconciler", "render", "--as", target, "-"],
                            input=yaml.safe_dump(job), capture_output=True, text=True, cwd=REPO_ROOT, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stderr
    return list(yaml.safe_load_all(result.stdout))


def dry_run(cluster: LocalCluster, objects: list[dict[str, object]]) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(objects))


@pytest.mark.usefixtures("crds")
@pytest.mark.parametrize(("target", "example"), [("jobset", "pi.yaml"), ("jobset", "pi-intel.yaml"),
                                                 ("jobset", "pi-mpich.yaml"), ("trainjob", "pi.yaml")])
def test_exports_pass_the_api_servers_validation(cluster: LocalCluster, namespace: str, target: str,
                                                 example: str) -> None:
    objects = exported(target, pi_example(example), namespace)
    result = dry_run(cluster, objects)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.strip().splitlines()) == len(objects) == (3 if target == "jobset" else 2), result.stdout


@pytest.mark.usefixtures("crds")
@pytest.mark.parametrize("target", ["jobset", "trainjob"])
def test_the_dry_run_refuses_what_the_schema_refuses(cluster: LocalCluster, namespace: str, target: str) -> None:
    objects = exported(target, pi_example("pi.yaml"), namespace)
    owner = objects[-1] if target == "jobset" else objects[0]
    spec = owner["spec"] if target == "jobset" else owner["spec"]["template"]["spec"]  # type: ignore[index]
    spec["replicatedJobs"][1]["dependsOn"][0]["status"] = "Started"  # type: ignore[index]
    result = dry_run(cluster, objects)
    assert result.returncode != 0
    assert 'Unsupported value: "Started"' in result.stderr, result.stderr
