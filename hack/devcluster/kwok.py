"""kwok: its configuration (the project's Stage files) and command line.

kwok v0.8.0 has no built-in stages: everything it does to nodes and pods comes from the Stage
objects in `hack/devcluster/kwok-stages/*.yaml`, concatenated into one `--config` file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
STAGES_DIR = Path(__file__).resolve().parent / "kwok-stages"
POD_CIDR = "10.244.0.0/16"
NODE_LEASE_SECONDS = 40
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node=fake"  # what nodes.build_node puts on every fake node


def stage_files(stages_dir: Path = STAGES_DIR) -> list[Path]:
    files = sorted(stages_dir.glob("*.yaml"))
    if not files:
        raise FileNotFoundError(f"no kwok stage files in {stages_dir}")
    return files


def write_config(path: Path, *, stages_dir: Path = STAGES_DIR) -> Path:
    """Write the kwok configuration: every stage file, as one multi-document YAML file.

    It deliberately holds no KwokConfiguration object: kwok v0.8.0 does not default the fields of one
    read from --config (e.g. nodeLeaseParallelism stays 0 and kwok exits). Its API client has no rate
    limit anyway."""
    docs = [f.read_text().strip() + "\n" for f in stage_files(stages_dir)]
    path.write_text("---\n".join(docs))
    return path


def argv(binary: Path, kubeconfig: Path, config: Path) -> list[str]:
    return [str(binary), f"--kubeconfig={kubeconfig}", f"--config={config}",
            f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}",  # never a real kubelet's node
            f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
            f"--cidr={POD_CIDR}"]


def environment(home: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for kwok: a private HOME (no stray ~/.kwok/kwok.yaml) and no KWOK_* variables."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in (base if base is not None else os.environ).items() if not k.startswith("KWOK_")}
    env["HOME"] = str(home)
    return env
