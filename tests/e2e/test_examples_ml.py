"""examples/horovod-pytorch.yaml and examples/deepspeed.yaml on the real node, applied as a user applies them:
the launcher runs `mpirun ... python3 script.py` (the mpirun form), two ranks, one on each worker, train a tiny
model on synthetic data, and every rank reports the allreduce of (rank + 1), which is exactly 3 for two ranks.

Their image (mpioperator/mpi-pytorch:openmpi: PyTorch and Open MPI 5 from Debian trixie, Horovod and DeepSpeed
built from PyPI) is large and slow to build cold, so `make node-images` leaves it out: the module's fixture builds
it on first use (`hack/build/build-images.sh pytorch`, cached afterwards) and imports it into the running node."""

from __future__ import annotations

import contextlib
import re
import sys
from pathlib import Path

import pytest
import yaml

from hack.devcluster import HarnessError
from hack.devcluster.mpijobs import JSON
from hack.devcluster.realnode import RealNodeCluster, image_archives
from tests.e2e.jobs import assert_ranks_on, run_to_success

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# the lines the scripts print whose values are exact (the loss values are printed, not asserted: only that
# the script found them falling, in its OK line)
RANK_REPORT = re.compile(r"^rank (\d+) of (\d+): allreduce sum (\S+), parameters equal on all ranks: (\S+)$",
                         re.MULTILINE)
EXPECTED = {
    "horovod-pytorch.yaml": (re.compile(r"^horovod: world size 2, loss [\d.]+ -> [\d.]+$", re.MULTILINE),
                             "horovod: OK"),
    "deepspeed.yaml": (re.compile(r"^deepspeed: world size 2, ZeRO stage 2, loss [\d.]+ -> [\d.]+$", re.MULTILINE),
                       "deepspeed: OK"),
}


@pytest.fixture(scope="module")
def pytorch_image(real_cluster: RealNodeCluster, pytestconfig: pytest.Config) -> None:
    """The examples' image on the node: built on first use (minutes, once; cached), then imported."""
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    try:
        # the build's progress and the import's time show, as the cluster fixture's own do
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            real_cluster.import_images(image_archives(["pytorch"]))
    except HarnessError as err:
        pytest.fail(f"the examples' image is not on the node: {err}", pytrace=False)


@pytest.mark.parametrize("example", list(EXPECTED))
def test_training_example_runs_on_both_workers(real_cluster: RealNodeCluster, namespace: str, pytorch_image: None,
                                                example: str) -> None:
    job: JSON = yaml.safe_load((EXAMPLES / example).read_text())
    log, _ = run_to_success(real_cluster, namespace, job, timeout=300)
    name = job["metadata"]["name"]
    assert_ranks_on(log, [f"{name}-worker-0", f"{name}-worker-1"])
    reports = sorted(RANK_REPORT.findall(log))
    assert reports == [("0", "2", "3", "True"), ("1", "2", "3", "True")], log
    summary, ok = EXPECTED[example]
    found = summary.search(log)
    assert found, log
    assert ok in log.splitlines(), log
    print(f"\n{found.group(0)}", file=sys.stderr)  # the loss figures, for the report
