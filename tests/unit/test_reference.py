"""Upstream's examples, or the project's copies of them where the reference folder is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.api import MPIJob
from tests import reference


@pytest.fixture
def no_reference(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(reference, "UPSTREAM_EXAMPLES", tmp_path / "absent")


@pytest.mark.usefixtures("no_reference")
def test_without_the_reference_folder_the_project_pi_examples_stand_in() -> None:
    params = reference.example_params()
    assert [p.id for p in params] == ["project/pi-openmpi.yaml", "project/pi-intel.yaml", "project/pi-mpich.yaml"]
    assert [p.values[0] for p in params] == [reference.PROJECT_EXAMPLES / n
                                             for n in ("pi-openmpi.yaml", "pi-intel.yaml", "pi-mpich.yaml")]
    assert not any(p.marks for p in params), "nothing is skipped"


@pytest.mark.usefixtures("no_reference")
@pytest.mark.parametrize(("file", "implementation"),
                         [("pi.yaml", "OpenMPI"), ("pi-intel.yaml", "Intel"), ("pi-mpich.yaml", "MPICH")])
def test_each_upstream_pi_example_has_a_project_copy_of_the_same_implementation(file: str,
                                                                                implementation: str) -> None:
    job = MPIJob.model_validate(reference.load_example(reference.pi_example(file)))
    assert job.spec is not None
    assert (job.spec.mpi_implementation or "OpenMPI") == implementation
    assert set(job.spec.mpi_replica_specs or {}) == {"Launcher", "Worker"}


def test_with_the_reference_folder_upstream_examples_are_used() -> None:
    if not reference.has_upstream_examples():
        pytest.skip("the reference folder with upstream's examples is not beside this checkout")
    assert reference.pi_example("pi.yaml") == reference.UPSTREAM_EXAMPLES / "v2beta1" / "pi" / "pi.yaml"
    assert all(p.id.startswith("v2beta1/") for p in reference.example_params())
