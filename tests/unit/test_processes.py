"""Stopping a process as kubelet stops a container (hack/devcluster/processes.terminate)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hack.devcluster.processes import PortPool, bindable, ephemeral_ports, free_port, listening_ports, terminate
from hack.devcluster.wait import HarnessError


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


def test_listening_ports_are_outside_the_ephemeral_range(tmp_path: Path) -> None:
    port_range = tmp_path / "ip_local_port_range"
    port_range.write_text("32768\t60999\n")
    ephemeral = ephemeral_ports(port_range)
    assert ephemeral == range(32768, 61000)
    assert listening_ports(ephemeral) == [*range(10000, 32768), *range(61000, 65536)]


def test_listening_ports_are_all_ports_when_the_ephemeral_range_covers_them() -> None:
    assert listening_ports(range(1024, 65536)) == list(range(10000, 65536))


def test_the_pool_hands_out_ports_in_turn_skipping_those_in_use_and_wrapping_around() -> None:
    pool = PortPool([20000, 20001, 20002, 20003])
    pool.next = 2
    in_use = {20003}
    taken = [pool.take(lambda port: port not in in_use) for _ in range(4)]
    assert taken == [20002, 20000, 20001, 20002]


def test_the_pool_says_so_when_every_port_is_in_use() -> None:
    pool = PortPool([20000, 20001])
    with pytest.raises(HarnessError, match="none of the 2 ports from 20000 to 20001 is free"):
        pool.take(lambda port: False)


def test_a_free_port_can_be_listened_on_and_is_not_handed_out_while_held() -> None:
    port = free_port()
    assert port not in ephemeral_ports()
    with socket.create_server(("0.0.0.0", port)):
        assert not bindable(port)
        assert free_port() != port
    assert bindable(port)
