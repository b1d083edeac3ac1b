"""Finding the control-plane binaries: $MPIJOB_TESTBIN, or hack/build/build-testbin.sh (which builds them
from Go modules on first use, ~15 minutes on 2 cores, and is a no-op once they are cached)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .wait import HarnessError

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build" / "build-testbin.sh"
ENV_VAR = "MPIJOB_TESTBIN"
REQUIRED = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok")


def missing(bin_dir: Path) -> list[str]:
    return [b for b in REQUIRED if not os.access(bin_dir / b, os.X_OK)]


def find_bin_dir() -> Path:
    """The directory holding every binary in REQUIRED, building them if needed.

    The build's progress goes to this process' stderr. Raises HarnessError with the reason when the
    binaries are neither there nor buildable."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        bin_dir = Path(explicit).expanduser()
        source = f"${ENV_VAR}"
    else:
        print(f"[harness] locating control-plane binaries with {BUILD_SCRIPT.relative_to(REPO_ROOT)} "
              "(a first build takes ~15 min)", file=sys.stderr, flush=True)
        proc = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, stderr=None, text=True,
                              cwd=REPO_ROOT, check=False)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            raise HarnessError(f"{BUILD_SCRIPT.name} failed with status {proc.returncode}: the control-plane "
                               f"binaries are missing and could not be built (see its output above), "
                               f"or set ${ENV_VAR} to a directory holding {', '.join(REQUIRED)}")
        bin_dir = Path(lines[-1])
        source = BUILD_SCRIPT.name
    absent = missing(bin_dir)
    if absent:
        raise HarnessError(f"{bin_dir} (from {source}) lacks {', '.join(absent)}")
    return bin_dir
