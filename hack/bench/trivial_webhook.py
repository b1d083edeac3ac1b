"""The yardstick for B2: the least an aiohttp admission server can do per request on this machine.

It parses the AdmissionReview with orjson and answers ``allowed: true`` over the same TLS setup as
``python -m webhook``: no defaulting, no validation, no logging, no metrics. The benchmark reports our
webhook's throughput as a fraction of this one's, measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio

import orjson
from aiohttp import web

from webhook.tls import build_server_context

JSON_HEADERS = {"Content-Type": "application/json"}  # as our webhook sets it: the cheapest way aiohttp has


async def admit(request: web.Request) -> web.Response:
    review = orjson.loads(await request.read())
    answer = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "response": {"uid": review["request"]["uid"], "allowed": True}}
    return web.Response(body=orjson.dumps(answer), headers=JSON_HEADERS)


async def ok(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def serve(port: int, cert: str, key: str) -> None:
    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.router.add_post("/{path:.*}", admit)
    app.router.add_get("/readyz", ok)
    context = build_server_context()
    context.load_cert_chain(cert, key)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tls-cert-file", required=True)
    parser.add_argument("--tls-key-file", required=True)
    args = parser.parse_args()
    import uvloop  # noqa: PLC0415

    uvloop.run(serve(args.port, args.tls_cert_file, args.tls_key_file))


if __name__ == "__main__":
    main()
