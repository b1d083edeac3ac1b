"""The machine's one real node is taken under a lock: a second run waits for the first, and gives up with a
clear error when the first keeps it past the wait (hack/devcluster/realnode.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hack.devcluster import HarnessError, realnode
from hack.devcluster.realnode import RealNodeCluster


def _cluster(tmp_path: Path, name: str) -> RealNodeCluster:
    return RealNodeCluster(tmp_path / name)


def test_a_second_run_waits_then_fails_clearly_and_takes_the_node_once_released(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(realnode, "LOCK_FILE", tmp_path / "realnode.lock")
    monkeypatch.setattr(realnode, "LOCK_WAIT", 0.2)
    first, second = _cluster(tmp_path, "first"), _cluster(tmp_path, "second")
    first._take_machine_lock()
    with pytest.raises(HarnessError, match="the real node stayed busy for 0s"):
        second._take_machine_lock()
    assert "the real node is in use by another run; waiting" in capsys.readouterr().err
    assert second._lock_fd is None
    first._release_machine_lock()
    second._take_machine_lock()
    assert second._lock_fd is not None
    second._release_machine_lock()
    assert (first._lock_fd, second._lock_fd) == (None, None)
