"""``LocalCluster.restart(start_at=...)``, which times the outage tests from the SIGTERM: the component starts
again at that moment however long it took to exit, or at once once it has exited if that moment has passed.
Run on a stand-in process that takes a second to exit on SIGTERM (kube-apiserver takes 20 s); needs no cluster.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from hack.devcluster import LocalCluster, processes
from hack.devcluster.wait import wait_for

# exits one second after its SIGTERM, as a component in its graceful shutdown does
SLOW_TO_EXIT = [sys.executable, "-c", "import signal, sys, time\n"
                "signal.signal(signal.SIGTERM, lambda *_: (time.sleep(1.0), sys.exit(0)))\n"
                "print('handler installed', flush=True)\n"
                "while True: time.sleep(0.05)\n"]


def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[LocalCluster, list[float]]:
    """A cluster object whose only process is the stand-in named kube-scheduler; the moments (monotonic) at which
    the restarted process was started, seen by the health wait that follows the start."""
    cluster = LocalCluster(tmp_path, verbose=False)
    started: list[float] = []
    monkeypatch.setattr(cluster, "_work_dir", tmp_path)
    monkeypatch.setattr("hack.devcluster.cluster.write_state", lambda *_: None)
    monkeypatch.setattr(cluster, "state", dict)
    monkeypatch.setattr(cluster, "_wait_component", lambda _: started.append(time.monotonic()))
    log = tmp_path / "stand-in.log"
    cluster.processes = [processes.start("kube-scheduler", SLOW_TO_EXIT, log)]
    wait_for(lambda: "handler installed" in log.read_text(), timeout=30, interval=0.02,
             what="the stand-in's SIGTERM handler installed")
    return cluster, started


@pytest.mark.parametrize(("start_after", "earliest", "latest"), [
    pytest.param(3.0, 3.0, 3.8, id="later-than-the-exit"),
    pytest.param(0.2, 1.0, 1.8, id="before-the-exit"),
])
def test_restart_at_a_moment_counts_from_the_signal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    start_after: float, earliest: float, latest: float) -> None:
    cluster, started = stand_in(tmp_path, monkeypatch)
    try:
        signalled = time.monotonic()
        cluster.restart("kube-scheduler", start_at=signalled + start_after)
        assert len(started) == 1
        assert earliest <= started[0] - signalled <= latest, started[0] - signalled
        assert cluster.timings["kube-scheduler stop"] >= 1.0
    finally:
        for process in cluster.processes:
            process.stop(timeout=5.0)
