"""Stopping a process as kubelet stops a container (hack/devcluster/processes.terminate)."""

from __future__ import annotations

import signal
import subprocess
import sys

from hack.devcluster.processes import terminate


def _python(handler: str) -> subprocess.Popen[bytes]:
    """A Python process that installs `handler` for SIGTERM, says so, then sleeps."""
    code = (f"import signal, sys, time; signal.signal(signal.SIGTERM, {handler}); print('up', flush=True); "
            "time.sleep(60)")
    started = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert started.stdout is not None
    assert started.stdout.readline() == b"up\n"
    return started


def test_a_process_that_exits_on_sigterm_gives_its_status() -> None:
    process = _python("lambda *_: sys.exit(3)")
    assert terminate(process, grace=10) == 3


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    process = _python("signal.SIG_IGN")
    assert terminate(process, grace=0.5) == -signal.SIGKILL


def test_a_process_already_gone_gives_its_status() -> None:
    process = _python("signal.SIG_DFL")
    process.kill()
    process.wait(timeout=10)
    assert terminate(process, grace=1) == -signal.SIGKILL
