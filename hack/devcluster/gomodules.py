"""Go modules downloaded from the module proxy (``go mod download``), for the files the tests take from them
without building anything: CRDs and manifests of JobSet, Kubeflow Trainer and Training Operator."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from .wait import HarnessError


class GoUnavailableError(HarnessError):
    """Go is not installed, so a module cannot be downloaded (the tests that need it skip)."""


def module_dir(module: str, version: str) -> Path:
    """The (read-only) directory of ``module@version``, cached by Go. Raises GoUnavailableError without Go,
    HarnessError when the proxy does not serve it."""
    if shutil.which("go") is None:
        raise GoUnavailableError(f"Go is not installed: {module}@{version} cannot be downloaded")
    proc = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], capture_output=True, text=True,
                          check=False, timeout=300, env={**os.environ, "GOFLAGS": "-mod=mod"})
    info: dict[str, Any] = json.loads(proc.stdout or "{}")
    if proc.returncode != 0 or not info.get("Dir"):
        raise HarnessError(f"go mod download {module}@{version} failed: {info.get('Error') or proc.stderr.strip()}")
    return Path(info["Dir"])
