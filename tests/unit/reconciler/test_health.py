"""``/healthz``: 200 while every check passes; 500 with the reasons when an informer stopped or the Lease
was lost without the process exiting, so that a kubelet restarts a wedged reconciler."""

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


async def healthz(health: Health) -> tuple[int, str]:
    app = web.Application()
    app.router.add_get("/healthz", health.healthz)
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/healthz")
        return response.status, await response.text()


async def test_healthy_when_every_check_passes() -> None:
    health = Health()
    health.add("leader", lambda: None)
    assert await healthz(health) == (200, "ok")


async def test_unhealthy_with_every_reason() -> None:
    health = Health()
    health.add("leader", lambda: "leadership lost")
    health.add("informers", lambda: "stopped: pods")
    assert await healthz(health) == (500, "leader: leadership lost\ninformers: stopped: pods\n")


def test_a_stopped_informer_is_named_and_one_not_yet_started_is_not() -> None:
    controller = cast(Controller, SimpleNamespace(informers=[
        informer("mpijobs", started=True, running=True), informer("pods", started=True, running=False),
        informer("jobs", started=False, running=False)]))
    assert _stopped_informers(controller) == "stopped: pods"
    controller.informers[1].running = True
    assert _stopped_informers(controller) is None
