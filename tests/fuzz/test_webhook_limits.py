"""Huge and deeply nested bodies through the webhook's HTTP application: never a 5xx, every denial has field
paths, and each request's time and memory stay bounded (figures printed with the fuzz figures).

The bounds are generous safety limits (a request that took minutes or gigabytes would be a denial of
service of the API server's admission chain), not performance targets.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from tests.fuzz.figures import FIGURES, Counter, Figure, current_rss_mib, peak_rss_mib, reset_peak_rss
from tests.fuzz.test_webhook_fuzz import check_response
from tests.webhook.conftest import Client, review
from webhook.app import DEFAULT_MAX_BODY_BYTES, MUTATE_PATH, VALIDATE_PATH

MAX_SECONDS = 30.0
MAX_RSS_GROWTH_MIB = 1024.0
MAX_LOG_LINE = 4096
LIMIT = DEFAULT_MAX_BODY_BYTES
CONTAINER = {"name": "main", "image": "mpi-image"}


def job(**spec: Any) -> dict[str, Any]:
    replica = {"template": {"spec": {"containers": [dict(CONTAINER)]}}}
    base: dict[str, Any] = {"mpiReplicaSpecs": {"Launcher": dict(replica), "Worker": {"replicas": 2, **replica}}}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "pi", "namespace": "default"},
            "spec": {**base, **spec}}


def padded(make: Callable[[int], dict[str, Any]], target: int = LIMIT - 4096) -> bytes:
    """The review body of ``make(n)`` with n chosen so the body is just under ``target`` bytes."""
    n, body = 10_000, orjson.dumps(make(10_000))
    base = len(orjson.dumps(make(0)))
    while not target - 2**18 < len(body) <= target:  # scale n until the body lands just under target
        n = max(1, int(n * (target - 2**17 - base) / (len(body) - base)))
        body = orjson.dumps(make(n))
    return body


def deep_text(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


def review_with(raw_object: str, operation: str = "CREATE") -> bytes:
    """A review whose object is raw JSON text (for nesting orjson.dumps would refuse to write)."""
    marker = '"__OBJECT__"'
    text = orjson.dumps(review({"placeholder": True}, operation)).decode().replace(
        '{"placeholder":true}', marker, 1)
    return text.replace(marker, raw_object, 1).encode()


def deep_job(depth: int, where: str) -> str:
    inner = deep_text(depth)
    if where == "slotsPerWorker":
        return '{"apiVersion":"kubeflow.org/v2beta1","kind":"MPIJob","metadata":{"name":"pi"},"spec":' \
               '{"slotsPerWorker":' + inner + "}}"
    return '{"apiVersion":"kubeflow.org/v2beta1","kind":"MPIJob","metadata":{"name":"pi"},"spec":{"mpiReplicaSpecs":' \
           '{"Launcher":{"template":{"spec":{"containers":[{"name":"c","image":"i","args":' + inner + "}]}}}}}}"


CASES: dict[str, Callable[[], bytes]] = {
    "100k-deep arrays": lambda: review_with(deep_text(100_000)),
    "100k-deep objects": lambda: review_with('{"a":' * 100_000 + "1" + "}" * 100_000),
    "100k open brackets, never closed": lambda: review_with("[" * 100_000),
    "1000-deep bad slotsPerWorker": lambda: review_with(deep_job(1000, "slotsPerWorker")),
    "1000-deep container args": lambda: review_with(deep_job(1000, "template")),
    "8 MiB valid job (env vars)": lambda: padded(lambda n: review(job() | {"spec": job()["spec"] | {
        "mpiReplicaSpecs": {"Launcher": {"template": {"spec": {"containers": [CONTAINER | {"env": [
            {"name": f"V{i}", "value": "x" * 200} for i in range(n)]}]}}}}}})),
    "8 MiB name": lambda: padded(lambda n: review(job() | {"metadata": {"name": "a" * n}})),
    "8 MiB string as slotsPerWorker": lambda: padded(lambda n: review(job(slotsPerWorker="x" * n))),
    "4M-element list as slotsPerWorker": lambda: padded(lambda n: review(job(slotsPerWorker=[0] * n))),
    "200k unknown replica types": lambda: padded(lambda n: review(job(mpiReplicaSpecs={
        f"worker{i:07d}": {} for i in range(n // 18)}))),
    "500k keys in a template": lambda: padded(lambda n: review(job(mpiReplicaSpecs={"Launcher": {"template": {
        "spec": {"containers": [CONTAINER]}, "metadata": {"labels": {f"k{i:07d}": "" for i in range(n)}}}}}))),
    "8 MiB apiVersion": lambda: orjson.dumps({"apiVersion": "x" * (LIMIT - 100), "kind": "AdmissionReview"}),
    "8 MiB uid and name": lambda: padded(lambda n: review(job(), uid="u" * n, name="n" * n)),
    "UPDATE, 4 MiB object and 4 MiB oldObject": lambda: padded(lambda n: review(
        job(slotsPerWorker="x" * n), "UPDATE", old=job(slotsPerWorker="y" * n))),
    "8 MiB of unicode escapes": lambda: padded(lambda n: review(job() | {"metadata": {
        "name": "pi", "annotations": {"a": "\u00e9" * n}}})),
    "one byte over the limit": lambda: orjson.dumps(review(job(slotsPerWorker="x" * LIMIT)))[: LIMIT + 1],
}


@pytest.mark.parametrize("path", [MUTATE_PATH, VALIDATE_PATH], ids=["mutate", "validate"])
@pytest.mark.parametrize("case", CASES)
async def test_huge_and_deep_bodies_are_bounded(client: Client, caplog: pytest.LogCaptureFixture, case: str,
                                                path: str) -> None:
    body = CASES[case]()
    before = current_rss_mib()
    reset_peak_rss()
    started = time.perf_counter()
    with caplog.at_level(logging.INFO, logger="webhook"):
        resp = await client.post(path, data=body, headers={"Content-Type": "application/json"})
        raw = await resp.read()
    seconds = time.perf_counter() - started
    growth = peak_rss_mib() - before
    counter = Counter(examples=1)
    check_response(path, body, resp.status, raw, counter)
    operation = "mutate" if path == MUTATE_PATH else "validate"
    FIGURES.append(Figure(f"limits {operation}: {case}", 1, seconds, peak_rss_mib(), {
        "body_mib": round(len(body) / 2**20, 1), "response_mib": round(len(raw) / 2**20, 2), "status": resp.status,
        "rss_growth_mib": round(growth), "outcome": next(iter(counter.extra))}))
    assert seconds < MAX_SECONDS
    assert growth < MAX_RSS_GROWTH_MIB
    long_lines = [len(r.getMessage()) + len(str(getattr(r, "kv", ""))) for r in caplog.records]
    assert max(long_lines, default=0) < MAX_LOG_LINE, "a log line carries the request's payload"
