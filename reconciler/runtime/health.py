"""The process's HTTP endpoints: ``/healthz`` and ``/readyz`` from named checks, and any other routes
(``/metrics``).

A check returns None when healthy, or a short reason. ``/healthz`` (liveness) answers 500 with the reasons
when any liveness check fails, so a kubelet restarts a wedged process (an informer that stopped, a Lease
refused for a lease duration, renewals stalled while leading). It stays 200 through an API server outage:
restarting a process that waits for the API server brings it back no sooner, and kubelet's crash-loop
back-off would then delay it. ``/readyz`` (readiness) answers 503 with the reasons when a liveness check or a
readiness check fails: waiting for the API server at start-up, Lease requests failing, the caches of a new
leadership term not synced yet.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

Check = Callable[[], str | None]


class Health:
    def __init__(self) -> None:
        self.checks: dict[str, Check] = {}
        self.readiness: dict[str, Check] = {}

    def add(self, name: str, check: Check) -> None:
        """A liveness check (it counts for readiness too)."""
        self.checks[name] = check

    def add_readiness(self, name: str, check: Check) -> None:
        """A check of readiness only: failing it never restarts the process."""
        self.readiness[name] = check

    def problems(self) -> list[str]:
        return _failed(self.checks)

    def not_ready(self) -> list[str]:
        return _failed(self.checks) + _failed(self.readiness)

    async def healthz(self, _: web.Request) -> web.Response:
        problems = self.problems()
        if problems:
            return web.Response(status=500, text="\n".join(problems) + "\n")
        return web.Response(text="ok")

    async def readyz(self, _: web.Request) -> web.Response:
        problems = self.not_ready()
        if problems:
            return web.Response(status=503, text="\n".join(problems) + "\n")
        return web.Response(text="ok")

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/healthz", self.healthz), web.get("/readyz", self.readyz)]


def _failed(checks: dict[str, Check]) -> list[str]:
    return [f"{name}: {reason}" for name, check in checks.items() if (reason := check()) is not None]


async def serve(port: int, routes: list[web.RouteDef], host: str = "0.0.0.0") -> web.AppRunner | None:
    """Serve ``routes`` on ``port`` (0: not at all)."""
    if not port:
        return None
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
