"""``/healthz``: 200 while every check passes; 500 with the reasons when an informer stopped or the Lease is
not renewed while leading, so that a kubelet restarts a wedged reconciler. ``/readyz``: 503 with the reasons of
those and of the readiness-only checks (waiting for the API server), which never fail ``/healthz``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from reconciler.__main__ import _stopped_informers
from reconciler.mpijob.controller import Controller
from reconciler.runtime.health import Health


def informer(plural: str, *, started: bool, running: bool) -> Any:
    return SimpleNamespace(resource=SimpleNamespace(plural=plural), started=started, running=running)


async def healthz(health: Health, path: str = "/healthz") -> tuple[int, str]:
    app = web.Application()
    app.add_routes(health.routes())
    async with TestClient(TestServer(app)) as client:
        response = await client.get(path)
        return response.status, await response.text()


async def test_healthy_when_every_check_passes() -> None:
    health = Health()
    health.add("leader", lambda: None)
    assert await healthz(health) == (200, "ok")


async def test_unhealthy_with_every_reason() -> None:
    health = Health()
    health.add("leader", lambda: "lease not renewed for 16 s")
    health.add("informers", lambda: "stopped: pods")
    assert await healthz(health) == (500, "leader: lease not renewed for 16 s\ninformers: stopped: pods\n")
    assert await healthz(health, "/readyz") == (503, "leader: lease not renewed for 16 s\ninformers: stopped: pods\n")


async def test_waiting_for_the_api_server_is_not_ready_but_alive() -> None:
    """A liveness probe must not restart a process that waits for the API server: a restart brings it back no
    sooner, and kubelet's crash-loop back-off would delay it."""
    health = Health()
    health.add("informers", lambda: None)
    health.add_readiness("api", lambda: "waiting for the API server for 12 s (failed attempts: 5): cannot reach")
    assert await healthz(health) == (200, "ok")
    assert await healthz(health, "/readyz") == (
        503, "api: waiting for the API server for 12 s (failed attempts: 5): cannot reach\n")
    health.add_readiness("api", lambda: None)
    assert await healthz(health, "/readyz") == (200, "ok")


def test_a_stopped_informer_is_named_and_one_not_yet_started_is_not() -> None:
    controller = cast(Controller, SimpleNamespace(informers=[
        informer("mpijobs", started=True, running=True), informer("pods", started=True, running=False),
        informer("jobs", started=False, running=False)]))
    assert _stopped_informers(controller) == "stopped: pods"
    controller.informers[1].running = True
    assert _stopped_informers(controller) is None
