"""The webhook's own request metrics export what prometheus_client's Counter and Histogram would."""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from webhook.metrics import LATENCY, LATENCY_BUCKETS, LATENCY_HELP, REQUESTS, REQUESTS_HELP, WebhookMetrics

# On a bound, just past one, below the first, past the last, and a second series of the same operation.
OBSERVATIONS = [("mutate", "patched", 0.0001), ("mutate", "patched", 0.00010001), ("mutate", "patched", 0.00003),
                ("validate", "denied", 0.0007), ("validate", "denied", 2.5), ("validate", "allowed", 0.001),
                ("mutate", "patched", 0.02)]


def library_exposition(observations: list[tuple[str, str, float]]) -> str:
    registry = CollectorRegistry()
    requests = Counter(REQUESTS, REQUESTS_HELP, ["operation", "result"], registry=registry)
    latency = Histogram(LATENCY, LATENCY_HELP, ["operation", "result"], buckets=LATENCY_BUCKETS, registry=registry)
    for operation, result, seconds in observations:
        requests.labels(operation, result).inc()
        latency.labels(operation, result).observe(seconds)
    return generate_latest(registry).decode()


def without_created_values(text: str) -> str:
    return re.sub(r"(_created\{[^}]*\}) \S+", r"\1 <time>", text)


def test_the_exposition_is_the_one_of_a_prometheus_client_counter_and_histogram() -> None:
    metrics = WebhookMetrics()
    for observation in OBSERVATIONS:
        metrics.observe(*observation)
    ours = generate_latest(metrics.registry).decode()
    assert without_created_values(ours) == without_created_values(library_exposition(OBSERVATIONS))
    assert 'mpijob_webhook_request_duration_seconds_bucket{le="0.0001",operation="mutate",result="patched"} 2.0' in ours


def test_no_request_no_series() -> None:
    assert generate_latest(WebhookMetrics().registry).decode() == library_exposition([])


def test_created_series_follow_the_library_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMETHEUS_DISABLE_CREATED_SERIES", "true")
    metrics = WebhookMetrics()
    metrics.observe("mutate", "allowed", 0.0002)
    ours = generate_latest(metrics.registry).decode()
    assert "_created" not in ours
    assert 'mpijob_webhook_requests_total{operation="mutate",result="allowed"} 1.0' in ours
