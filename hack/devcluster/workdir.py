"""The cluster's work directory: its state file, its removal, and the sweep of directories left by
test runs that were killed outright (SIGKILL leaves no chance to clean up)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from .processes import Process, ProcessRecord, is_running, proc_start_ticks

TEMP_PREFIX = "mpijob-cluster-"
STATE_FILE = "state.json"
RUNTIME_ENTRIES = ("pki", "etcd", "kwok-home", "kubectl-cache", "kubeconfig", "kwok.yaml", "scheduler.yaml",
                   STATE_FILE)


def owner_record() -> ProcessRecord:
    """This Python process, as the owner of a temp work dir."""
    pid = os.getpid()
    return ProcessRecord(name="owner", pid=pid, start_ticks=proc_start_ticks(pid), argv=list(sys.argv), log="")


def read_state(work_dir: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((work_dir / STATE_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data


def write_state(work_dir: Path, state: dict[str, Any]) -> None:
    tmp = work_dir / f".{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(work_dir / STATE_FILE)


def recorded_processes(state: dict[str, Any]) -> list[ProcessRecord]:
    return [ProcessRecord.from_json(r) for r in state.get("processes", [])]


def stop_recorded(state: dict[str, Any]) -> int:
    """Stop the recorded processes that still run, last started first; returns how many."""
    stopped = 0
    for record in reversed(recorded_processes(state)):
        if is_running(record):
            Process(record).stop()
            stopped += 1
    return stopped


def remove_runtime_data(work_dir: Path, *, owned: bool, keep_logs: Path | None = None) -> None:
    """Delete what a cluster wrote into `work_dir` (all of it when the harness created the dir); copy
    the logs to `keep_logs` first when given (nothing to copy when that is `work_dir/logs` itself)."""
    logs = work_dir / "logs"
    in_place = keep_logs is not None and keep_logs.resolve() == logs.resolve()
    if keep_logs is not None and not in_place and logs.is_dir():
        shutil.copytree(logs, keep_logs, dirs_exist_ok=True)
    if owned:
        shutil.rmtree(work_dir, ignore_errors=True)
        return
    for name in RUNTIME_ENTRIES:
        path = work_dir / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    if not in_place:
        shutil.rmtree(logs, ignore_errors=True)
    if work_dir.is_dir() and not any(work_dir.iterdir()):
        work_dir.rmdir()


def sweep_stale_temp_dirs(parent: Path | None = None) -> list[Path]:
    """Remove temp work dirs of earlier runs whose owning Python process is gone (it was killed), after
    stopping any component they recorded that still runs. Returns the removed directories."""
    removed = []
    for work_dir in Path(parent or tempfile.gettempdir()).glob(f"{TEMP_PREFIX}*"):
        state = read_state(work_dir)
        if state is None or "owner" not in state or state.get("detached"):
            continue
        if is_running(ProcessRecord.from_json(state["owner"])):
            continue
        stop_recorded(state)
        shutil.rmtree(work_dir, ignore_errors=True)
        removed.append(work_dir)
    return removed
