"""The process's HTTP endpoints: ``/healthz`` from named checks, and any other routes (``/metrics``).

A check returns None when healthy, or a short reason. ``/healthz`` answers 500 with the reasons when
any check fails, so a kubelet restarts a wedged process (an informer that stopped, leadership lost
without exiting).
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

Check = Callable[[], str | None]


class Health:
    def __init__(self) -> None:
        self.checks: dict[str, Check] = {}

    def add(self, name: str, check: Check) -> None:
        self.checks[name] = check

    def problems(self) -> list[str]:
        return [f"{name}: {reason}" for name, check in self.checks.items() if (reason := check()) is not None]

    async def healthz(self, _: web.Request) -> web.Response:
        problems = self.problems()
        if problems:
            return web.Response(status=500, text="\n".join(problems) + "\n")
        return web.Response(text="ok")


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
