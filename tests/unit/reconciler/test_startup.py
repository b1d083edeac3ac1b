"""Waiting for the API server at start-up (issue 29): what is waited out and what fails at once, the back-off,
one log line per attempt, the reason on /readyz; against a small fake API server (aiohttp) and, for the whole
process, ``python -m reconciler`` itself."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from hack.devcluster.processes import free_port
from reconciler.__main__ import TRAINING_OPERATOR_CRD, _CrdMissingError, _wait_for_api
from reconciler.runtime.client import ApiError, KubeClient, StartupError
from reconciler.runtime.health import Health
from reconciler.runtime.startup import ApiWait, Backoff, Unavailable, readyz_problem, transient_reason
from tests.unit.reconciler.test_client import REPO_ROOT, Configuration

MPIJOBS = "/apis/kubeflow.org/v2beta1/mpijobs"
NOT_READY = ("[+]ping ok\n[+]etcd ok\n[-]poststarthook/crd-informer-synced failed: reason withheld\n"
             "[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\nreadyz check failed\n")
FAST = Backoff(initial=0.001, cap=0.004)


def test_backoff_doubles_to_its_cap_within_its_jitter() -> None:
    backoff = Backoff()
    assert [backoff.delay(n, lambda: 0.5) for n in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert backoff.delay(6, lambda: 0.0) == pytest.approx(6.4)
    assert backoff.delay(6, lambda: 1.0) == pytest.approx(9.6)
    assert backoff.delay(1, lambda: 1.0) == pytest.approx(0.6)


class FakeApi:
    """Scripted answers: ``mpijobs`` and ``readyz`` are lists of (status, body) consumed one per request (the
    last one repeats)."""

    def __init__(self, mpijobs: list[tuple[int, Any]], readyz: list[tuple[int, str]] | None = None,
                 v1: tuple[int, Any] = (404, {})) -> None:
        self.mpijobs, self.readyz, self.v1 = mpijobs, readyz or [(200, "ok")], v1
        self.calls: list[str] = []

    @staticmethod
    def _next(script: list[Any]) -> Any:
        return script.pop(0) if len(script) > 1 else script[0]

    async def list_mpijobs(self, _: web.Request) -> web.Response:
        self.calls.append("mpijobs")
        status, body = self._next(self.mpijobs)
        return web.json_response(body, status=status)

    async def ready(self, _: web.Request) -> web.Response:
        self.calls.append("readyz")
        status, body = self._next(self.readyz)
        return web.Response(status=status, text=body)

    async def discover_v1(self, _: web.Request) -> web.Response:
        self.calls.append("kubeflow.org/v1")
        status, body = self.v1
        return web.json_response(body, status=status)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get(MPIJOBS, self.list_mpijobs)
        app.router.add_get("/apis/kubeflow.org/v1", self.discover_v1)
        app.router.add_get("/readyz", self.ready)
        return app


def status(code: int, reason: str, message: str) -> tuple[int, Any]:
    return code, {"kind": "Status", "status": "Failure", "code": code, "reason": reason, "message": message}


EMPTY_LIST = (200, {"kind": "MPIJobList", "items": [], "metadata": {"resourceVersion": "1"}})
NOT_FOUND = status(404, "NotFound", "the server could not find the requested resource")
FORBIDDEN = status(403, "Forbidden", 'mpijobs.kubeflow.org is forbidden: User "u" cannot list resource "mpijobs"')


@contextlib.asynccontextmanager
async def served(api: FakeApi) -> AsyncIterator[KubeClient]:
    async with TestServer(api.app()) as server:
        client = KubeClient(Configuration(str(server.make_url("")).rstrip("/")), qps=0, burst=1)
        try:
            yield client
        finally:
            await client.close()


async def reason_for(api: FakeApi) -> str | None:
    async with served(api) as client:
        try:
            await client.request("GET", MPIJOBS)
        except ApiError as error:
            return await transient_reason(client, "https://api", error)
    raise AssertionError("the request succeeded")


@pytest.mark.parametrize(("answer", "readyz", "expected"), [
    pytest.param(status(503, "ServiceUnavailable", "etcd starting"), "ok", "answered 503 ServiceUnavailable",
                 id="5xx: waited for"),
    pytest.param(status(429, "TooManyRequests", "slow down"), "ok", "answered 429", id="429 beyond its retries"),
    pytest.param(NOT_FOUND, "ok", None, id="404 from a ready API server: the CRD is missing"),
    pytest.param(NOT_FOUND, NOT_READY, "is not ready (/readyz 500: poststarthook/crd-informer-synced, "
                 "poststarthook/rbac/bootstrap-roles not ready) and answered 404 NotFound", id="404 while not ready"),
    pytest.param(FORBIDDEN, "ok", None, id="403 from a ready API server: RBAC"),
    pytest.param(FORBIDDEN, NOT_READY, "and answered 403 Forbidden", id="403 while not ready"),
    pytest.param(status(400, "BadRequest", "no"), NOT_READY, None, id="other 4xx: never"),
])
async def test_what_is_waited_for(answer: tuple[int, Any], readyz: str, expected: str | None) -> None:
    code = 200 if readyz == "ok" else 500
    found = await reason_for(FakeApi([answer], [(code, readyz)]))
    if expected is None:
        assert found is None
    else:
        assert found is not None
        assert expected in found, found
        assert "the API server at https://api" in found


@pytest.mark.parametrize("code", [401, 403, 404])
async def test_a_readyz_that_cannot_be_read_counts_as_ready(code: int) -> None:
    """An API server that refuses or does not serve /readyz cannot tell: its answers are taken as they are."""
    async with served(FakeApi([EMPTY_LIST], [(code, "no")])) as client:
        assert await readyz_problem(client) is None


async def test_an_unreachable_api_server_is_waited_for() -> None:
    port = free_port()
    client = KubeClient(Configuration(f"http://127.0.0.1:{port}"), qps=0, burst=1)
    try:
        with pytest.raises(aiohttp.ClientError) as raised:
            await client.request("GET", MPIJOBS)
        reason = await transient_reason(client, "https://api", raised.value)
    finally:
        await client.close()
    assert reason is not None
    assert reason.startswith(f"cannot reach the API server at https://api: Cannot connect to host 127.0.0.1:{port}")


@pytest.mark.parametrize("error", [
    pytest.param(aiohttp.ClientConnectorCertificateError(cast(Any, None), ssl.SSLCertVerificationError("bad CA")),
                 id="certificate"),
    pytest.param(aiohttp.InvalidURL("htp:/x"), id="invalid URL"),
    pytest.param(ValueError("garbled"), id="anything else"),
])
async def test_configuration_errors_are_not_waited_for(error: BaseException) -> None:
    assert await transient_reason(cast(KubeClient, None), "https://api", error) is None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_the_wait_logs_one_line_per_attempt_and_reports_why(caplog: pytest.LogCaptureFixture) -> None:
    clock, reported = Clock(), []
    waiting = ApiWait("https://api", FAST, clock)
    failures = ["cannot reach the API server at https://api: refused"] * 3

    async def probe() -> None:
        reported.append(waiting.problem())
        clock.now += 2
        if failures:
            raise Unavailable(failures.pop())

    with caplog.at_level(logging.INFO, logger="reconciler.startup"):
        assert await waiting.wait(probe, asyncio.Event()) is True
    assert reported == [None] + [f"waiting for the API server for {2 * n} s (failed attempts: {n}): cannot reach the "
                                 "API server at https://api: refused" for n in (1, 2, 3)]
    assert waiting.problem() is None
    lines = [r for r in caplog.records if r.getMessage() == "waiting for the API server"]
    assert [r.kv["attempt"] for r in lines] == [1, 2, 3]  # type: ignore[attr-defined]
    assert all(r.levelno == logging.WARNING for r in lines)
    assert [r.getMessage() for r in caplog.records][-1] == "API server reachable"


async def test_a_fatal_error_ends_the_wait_at_once() -> None:
    calls = []

    async def probe() -> None:
        calls.append(1)
        raise StartupError("refused")

    with pytest.raises(StartupError):
        await ApiWait("https://api", FAST).wait(probe, asyncio.Event())
    assert calls == [1]


async def test_sigterm_ends_the_wait() -> None:
    stop = asyncio.Event()

    async def probe() -> None:
        stop.set()
        raise Unavailable("down")

    assert await ApiWait("https://api", Backoff(initial=60, cap=60)).wait(probe, stop) is False


async def wait_with(api: FakeApi) -> tuple[bool, Health]:
    health = Health()
    async with served(api) as client:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("reconciler.__main__.ApiWait", lambda host: ApiWait(host, FAST))
            return await _wait_for_api(client, "", "https://api", health, asyncio.Event()), health


async def test_mpijobs_not_served_while_the_api_server_starts_are_waited_for() -> None:
    api = FakeApi([NOT_FOUND, NOT_FOUND, status(503, "ServiceUnavailable", "x"), EMPTY_LIST],
                  [(500, NOT_READY), (500, NOT_READY), (200, "ok")])
    ready, health = await wait_with(api)
    assert ready is True
    assert api.calls == ["mpijobs", "readyz", "mpijobs", "readyz", "mpijobs", "mpijobs"]
    assert health.not_ready() == []


@pytest.mark.parametrize(("answer", "error", "message", "calls"), [
    pytest.param(NOT_FOUND, _CrdMissingError, None, ["mpijobs", "readyz", "kubeflow.org/v1"], id="CRD missing"),
    pytest.param(FORBIDDEN, StartupError, "the API server at https://api refused to list MPIJobs: 403 Forbidden",
                 ["mpijobs", "readyz"], id="RBAC"),
])
async def test_misconfiguration_fails_at_once(answer: tuple[int, Any], error: type[Exception],
                                              message: str | None, calls: list[str]) -> None:
    api = FakeApi([answer])
    with pytest.raises(error, match=re.escape(message) if message else None):
        await wait_with(api)
    assert api.calls == calls


TRAINING_OPERATOR_V1 = (200, {"kind": "APIResourceList", "groupVersion": "kubeflow.org/v1", "resources": [
    {"name": "mpijobs", "namespaced": True, "kind": "MPIJob"}, {"name": "mpijobs/status", "kind": "MPIJob"}]})


async def test_the_training_operators_crd_is_named_as_the_reason() -> None:
    """Kubeflow Training Operator v1's CRD has the same name and serves kubeflow.org/v1 only: said, then upstream's
    line."""
    api = FakeApi([NOT_FOUND], v1=TRAINING_OPERATOR_V1)
    with pytest.raises(_CrdMissingError) as raised:
        await wait_with(api)
    assert raised.value.why == TRAINING_OPERATOR_CRD
    assert api.calls == ["mpijobs", "readyz", "kubeflow.org/v1"]


# ---- the process
def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(f"""apiVersion: v1
kind: Config
current-context: c
contexts: [{{name: c, context: {{cluster: k, user: u}}}}]
clusters: [{{name: k, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{token: abc}}}}]
""")
    return path


async def reconciler(config: Path, health_port: int, *flags: str) -> asyncio.subprocess.Process:
    env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "reconciler", f"--kubeConfig={config}", f"--health-port={health_port}", *flags,
        cwd=REPO_ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(30):
        while not condition():  # noqa: ASYNC110  (polling another process)
            await asyncio.sleep(0.1)


async def test_the_process_waits_for_an_unreachable_api_server_healthy_not_ready(tmp_path: Path) -> None:
    """What used to be `error: cannot reach the API server` and exit 1: now a wait, until SIGTERM."""
    port, health_port = free_port(), free_port()
    process = await reconciler(kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{port}"), health_port)
    try:
        def answered() -> bool:
            try:
                return get(health_port, "/readyz")[0] == 503
            except OSError:
                return False

        await until(answered)
        await asyncio.sleep(2)
        assert get(health_port, "/healthz") == (200, "ok")
        code, body = get(health_port, "/readyz")
        assert code == 503
        assert body.startswith("api: waiting for the API server for ")
        assert f"cannot reach the API server at https://127.0.0.1:{port}: Cannot connect to host" in body
        assert process.returncode is None
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0
    log = stderr.decode()
    attempts = [line for line in log.splitlines() if 'msg="waiting for the API server"' in line]
    assert len(attempts) >= 3, log
    assert [int(re.findall(r" attempt=(\d+)", line)[0]) for line in attempts] == list(range(1, len(attempts) + 1))
    assert "Traceback" not in log
    assert log.splitlines()[-1].endswith("msg=stopped")


async def test_the_process_exits_on_a_missing_crd_once_the_api_server_is_ready(tmp_path: Path) -> None:
    """The CRD not served while the API server starts is waited for; the same answer once it is ready is
    upstream's `CRD doesn't exist. Exiting`, exit 1."""
    api = FakeApi([NOT_FOUND], [(500, NOT_READY), (500, NOT_READY), (200, "ok")])
    async with TestServer(api.app()) as server:
        config = kubeconfig(tmp_path / "kubeconfig", str(server.make_url("")).rstrip("/"))
        process = await reconciler(config, 0)
        _, stderr = await asyncio.wait_for(process.communicate(), 60)
    log = stderr.decode()
    assert process.returncode == 1, log
    assert api.calls == ["mpijobs", "readyz"] * 3 + ["kubeflow.org/v1"]
    assert sum('msg="waiting for the API server"' in line for line in log.splitlines()) == 2
    assert log.splitlines()[-1].endswith('msg="CRD doesn\'t exist. Exiting"'), log
    assert "Traceback" not in log
