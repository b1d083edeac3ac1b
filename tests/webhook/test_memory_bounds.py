"""The real ``python -m webhook`` stays under its Deployment's memory limit whatever it is sent: a chunked 64 MiB
body to an admission route is refused without being buffered, and the largest ConversionReviews it accepts,
made of the smallest MPIJobs or of empty objects (the costliest JSON to parse), are answered with the peak
resident memory of the process (VmHWM) under deploy/webhook/deployment.yaml's ``limits.memory``."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yaml

from tests.webhook.conftest import review
from webhook.app import CONVERT_PATH, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONVERSION_COST_BYTES, VALIDATE_PATH
from webhook.limits import parse_cost

ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024
TINY = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {}}
REVIEW = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/status")


def memory_limit() -> int:
    """limits.memory of the webhook container in the shipped manifests, in bytes."""
    deployment = yaml.safe_load((ROOT / "deploy" / "webhook" / "deployment.yaml").read_text(encoding="utf-8"))
    limit = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
    assert limit.endswith("Mi"), limit
    return int(limit[:-2]) * MiB


def status_bytes(pid: int, field: str) -> int:
    """A kB field of /proc/<pid>/status (VmRSS, VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("certs")
    subprocess.run([sys.executable, "-m", "webhook.certs", "--out-dir", str(out), "--ip", "127.0.0.1"],
                   check=True, capture_output=True, cwd=ROOT, timeout=60)
    return out


class Webhook:
    def __init__(self, process: subprocess.Popen[bytes], port: int) -> None:
        self.process, self.url = process, f"https://127.0.0.1:{port}"

    def peak(self) -> int:
        return status_bytes(self.process.pid, "VmHWM")

    def resident(self) -> int:
        return status_bytes(self.process.pid, "VmRSS")


@pytest.fixture
def webhook(bundle: Path) -> Iterator[Webhook]:
    """A fresh ``python -m webhook`` (its VmHWM counts from its start), serving once /healthz answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "webhook", "--bind-address", "127.0.0.1", "--port", str(port),
         "--tls-cert-file", str(bundle / "tls.crt"), "--tls-key-file", str(bundle / "tls.key")],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, "the webhook exited"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the webhook did not listen within 60 s"
                time.sleep(0.05)
        yield Webhook(process, port)
    finally:
        process.terminate()
        process.wait(30)


async def post(url: str, data: Any) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as session, session.post(
            url, data=data, ssl=False, headers={"Content-Type": "application/json"},
            timeout=aiohttp.ClientTimeout(total=300)) as resp:
        return resp.status, await resp.read()


async def test_a_chunked_64_mib_body_to_validate_gets_413_without_being_buffered(webhook: Webhook) -> None:
    idle = webhook.resident()

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the server learns the size while reading
        chunk = b" " * (64 * 1024)
        for _ in range(64 * MiB // len(chunk)):
            yield chunk

    status, body = await post(webhook.url + VALIDATE_PATH, chunks())
    assert (status, orjson.loads(body)["message"]) == (
        413, "request body too large for the MPIJob webhook: Maximum request body size 8388608 exceeded.")
    # what was read before the refusal (8 MiB and a chunk), not 64 MiB
    assert webhook.peak() - idle < 16 * MiB, f"peak {webhook.peak() / MiB:.1f} MiB from {idle / MiB:.1f} MiB idle"


def largest_review(objects: Callable[[int], list[Any]], desired: str) -> bytes:
    """The largest body of ``objects(n)`` whose parse cost the default limit accepts: one object more is refused."""

    def body(count: int) -> bytes:
        return orjson.dumps({**REVIEW, "request": {"uid": "u", "desiredAPIVersion": desired,
                                                   "objects": objects(count)}})

    each = parse_cost(body(2)) - parse_cost(body(1))  # an object and a comma
    base = parse_cost(body(1)) - each
    count = (DEFAULT_MAX_CONVERSION_COST_BYTES - base) // each
    largest = body(count)
    assert parse_cost(largest) <= DEFAULT_MAX_CONVERSION_COST_BYTES < parse_cost(body(count + 1))
    return largest


@pytest.mark.parametrize(("objects", "desired"), [
    pytest.param(lambda n: [TINY] * n, "kubeflow.org/v2", id="smallest-mpijobs"),  # each one converted
    pytest.param(lambda n: [{**TINY, "spec": {"x": [{}] * n}}], "kubeflow.org/v2beta1", id="empty-objects"),
])
async def test_the_largest_accepted_review_is_converted_under_the_memory_limit(
        webhook: Webhook, objects: Callable[[int], list[Any]], desired: str) -> None:
    body = largest_review(objects, desired)
    status, answer = await post(webhook.url + CONVERT_PATH, body)
    assert (status, orjson.loads(answer)["response"]["result"]) == (200, {"status": "Success"})
    assert webhook.peak() < memory_limit(), (
        f"peak {webhook.peak() / MiB:.0f} MiB for {len(body) / MiB:.1f} MiB, limit {memory_limit() / MiB:.0f} MiB")


async def test_a_full_admission_review_of_empty_objects_beside_the_costliest_conversion(webhook: Webhook) -> None:
    """Large bodies take turns (LARGE_REQUEST_GATE): an 8 MiB AdmissionReview of empty objects, the costliest the
    admission limit lets through, and the costliest accepted ConversionReview, sent at once, are never parsed side
    by side."""
    conversion = largest_review(lambda n: [{**TINY, "spec": {"x": [{}] * n}}], "kubeflow.org/v2beta1")
    empty = orjson.dumps(review({**TINY, "spec": {"x": []}}))
    admission = orjson.dumps(review({**TINY, "spec": {"x": [{}] * ((DEFAULT_MAX_BODY_BYTES - len(empty)) // 3)}}))
    assert DEFAULT_MAX_BODY_BYTES - 3 < len(admission) <= DEFAULT_MAX_BODY_BYTES
    (converted, answer), (admitted, _) = await asyncio.gather(post(webhook.url + CONVERT_PATH, conversion),
                                                              post(webhook.url + VALIDATE_PATH, admission))
    assert (converted, orjson.loads(answer)["response"]["result"], admitted) == (200, {"status": "Success"}, 200)
    assert webhook.peak() < memory_limit(), f"peak {webhook.peak() / MiB:.0f} MiB, limit {memory_limit() / MiB:.0f} MiB"
