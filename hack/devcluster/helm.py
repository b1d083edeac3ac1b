"""Helm (helm.sh/helm/v4, built by hack/build/build-helm.sh) and the chart deploy/chart/mpi-operator.

    helm = find_helm()                            # built on first use (~2 min on 2 cores), then cached
    objects = render_chart(helm, value_flags({"reconciler.threadiness": "4"}))   # `helm template`, the CRD included
    objects = release_objects(helm, kubeconfig)   # `helm get manifest` of the installed release

A release installed on a cluster of the harness, with its waits, is in operator_deploy.py (helm_install).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .wait import HarnessError

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build" / "build-helm.sh"
CHART = REPO_ROOT / "deploy" / "chart" / "mpi-operator"
VERSION = "v4.3.2"
RELEASE = "mpi-operator"
RELEASE_NAMESPACE = "default"  # where the release's record lives; its objects go to mpi-operator (values.yaml)


class HelmUnavailableError(HarnessError):
    """Helm is not built and cannot be: Go is not installed."""


class HelmError(HarnessError):
    """A helm command failed; the message holds its stderr."""


def find_helm() -> Path:
    """The helm binary, built on first use (the build's progress goes to stderr). Raises
    HelmUnavailableError when it is not built and Go is absent, HarnessError when the build fails."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, stderr=None, text=True,
                          cwd=REPO_ROOT, check=False, env={**os.environ, "HELM_VERSION": VERSION})
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 2 and shutil.which("go") is None:
        raise HelmUnavailableError(f"Helm {VERSION} is not built and Go is not installed "
                                   f"({BUILD_SCRIPT.name} builds it from the Go module proxy)")
    if proc.returncode != 0 or not lines or not os.access(lines[-1], os.X_OK):
        raise HarnessError(f"{BUILD_SCRIPT.name} failed with status {proc.returncode} (see its output above)")
    return Path(lines[-1])


def value_flags(values: Mapping[str, str] | None = None, files: Mapping[str, Path] | None = None,
                value_files: Sequence[Path] = ()) -> list[str]:
    """helm's flags for VALUES (--set: typed as helm types them, so "4" is a number), FILES (--set-file) and
    VALUE_FILES (--values)."""
    flags = [f"--values={path}" for path in value_files]
    flags += [f"--set={key}={value}" for key, value in (values or {}).items()]
    return flags + [f"--set-file={key}={path}" for key, path in (files or {}).items()]


def helm(binary: Path, *args: str, kubeconfig: Path | None = None) -> str:
    """Runs `helm ARGS` and returns its stdout; raises HelmError with its stderr when it fails."""
    env = dict(os.environ)
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    proc = subprocess.run([str(binary), *args], capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        output = "\n".join(text.strip() for text in (proc.stdout, proc.stderr) if text.strip())  # lint: stdout
        raise HelmError(f"helm {' '.join(args[:2])} failed with status {proc.returncode}: {output}")
    return proc.stdout


def render_chart(binary: Path, flags: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The objects `helm template` renders from the chart with FLAGS (value_flags), its CRDs included."""
    text = helm(binary, "template", RELEASE, str(CHART), "--include-crds", *flags)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def release_objects(binary: Path, kubeconfig: Path, release: str = RELEASE,
                    namespace: str = RELEASE_NAMESPACE) -> list[dict[str, Any]]:
    """The objects of the installed RELEASE as Helm recorded them (`helm get manifest`): its templates, the CRD
    included (crds.enabled)."""
    text = helm(binary, "get", "manifest", release, f"--namespace={namespace}", kubeconfig=kubeconfig)
    return [doc for doc in yaml.safe_load_all(text) if doc]
