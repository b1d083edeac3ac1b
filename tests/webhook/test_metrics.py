"""The webhook's request metrics: the names, help texts, labels and buckets a scrape shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from prometheus_client import generate_latest

from webhook.metrics import WebhookMetrics

REQUESTS_HELP = ("Admission and conversion requests by operation (mutate, validate, convert, mutate_pod) and result "
                 "(allowed, patched, denied, converted, failed, bad_request, too_large, error).")
LATENCY_HELP = "Time to answer an admission or conversion request, from the first body byte to the response."
FAILURES_HELP = ("ConversionReviews answered with result Failed (an object that cannot be converted, a body that is "
                 "not a ConversionReview or is over a limit, an internal error).")
FAILURES = [f"# HELP mpijob_webhook_conversion_failures_total {FAILURES_HELP}",
            "# TYPE mpijob_webhook_conversion_failures_total counter",
            "mpijob_webhook_conversion_failures_total 0.0"]
# each operation's error count, exported at 0 before any request (webhook/metrics.py, OPERATIONS)
ERRORS = [f'mpijob_webhook_requests_total{{operation="{operation}",result="error"}} 0.0'
          for operation in ("mutate", "validate", "convert", "mutate_pod")]
SKIPPED_HELP = ("Pods of an IndexedJob worker Job allowed without the rank label training.kubeflow.org/replica-index, "
                "by reason (no_index, malformed_index, malformed_offset, not_a_pod): Kueue's topology-aware placement "
                "then falls back to ignoring ranks.")
# each reason the pod webhook leaves a pod without its rank label, exported at 0 (webhook/metrics.py)
SKIPPED = [f"# HELP mpijob_webhook_replica_index_skipped_total {SKIPPED_HELP}",
           "# TYPE mpijob_webhook_replica_index_skipped_total counter",
           *(f'mpijob_webhook_replica_index_skipped_total{{reason="{reason}"}} 0.0'
             for reason in ("no_index", "malformed_index", "malformed_offset", "not_a_pod"))]
BOUNDS = ["0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "1.0",
          "+Inf"]


def without_created(text: str) -> list[str]:
    """The exposition's lines without the ``_created`` series (their values are times)."""
    return [line for line in text.splitlines() if not re.match(r"(# \w+ )?\w+_created\b", line)]


def test_one_request_is_one_counted_series_and_one_histogram_series() -> None:
    metrics = WebhookMetrics()
    metrics.observe("mutate", "patched", 0.0003)
    labels = 'operation="mutate",result="patched"'
    buckets = [f'mpijob_webhook_request_duration_seconds_bucket{{le="{bound}",{labels}}} {float(i >= 2)}'
               for i, bound in enumerate(BOUNDS)]
    assert without_created(generate_latest(metrics.registry).decode()) == [
        f"# HELP mpijob_webhook_requests_total {REQUESTS_HELP}",
        "# TYPE mpijob_webhook_requests_total counter",
        *ERRORS,
        f"mpijob_webhook_requests_total{{{labels}}} 1.0",
        f"# HELP mpijob_webhook_request_duration_seconds {LATENCY_HELP}",
        "# TYPE mpijob_webhook_request_duration_seconds histogram",
        *buckets,
        f"mpijob_webhook_request_duration_seconds_count{{{labels}}} 1.0",
        f"mpijob_webhook_request_duration_seconds_sum{{{labels}}} 0.0003",
        *FAILURES,
        *SKIPPED,
    ]


def test_series_per_operation_and_result() -> None:
    metrics = WebhookMetrics()
    for operation, result, seconds in [("validate", "denied", 0.0007), ("validate", "denied", 2.5),
                                       ("validate", "allowed", 0.001), ("mutate", "allowed", 0.0001)]:
        metrics.observe(operation, result, seconds)
    text = generate_latest(metrics.registry).decode()
    assert 'mpijob_webhook_requests_total{operation="validate",result="denied"} 2.0' in text
    assert 'mpijob_webhook_requests_total{operation="validate",result="allowed"} 1.0' in text
    assert 'mpijob_webhook_request_duration_seconds_bucket{le="1.0",operation="validate",result="denied"} 1.0' in text
    assert 'mpijob_webhook_request_duration_seconds_bucket{le="0.0001",operation="mutate",result="allowed"} 1.0' in text
    assert 'mpijob_webhook_request_duration_seconds_sum{operation="validate",result="denied"} 2.5007' in text


def test_no_request_no_series_but_the_errors_at_zero() -> None:
    """No series of requests but each operation's error count at 0 (for the MPIJobWebhookErrors alert's rate());
    no latency series; the conversion failures counter, which has no labels, is 0."""
    assert without_created(generate_latest(WebhookMetrics().registry).decode()) == [
        f"# HELP mpijob_webhook_requests_total {REQUESTS_HELP}",
        "# TYPE mpijob_webhook_requests_total counter",
        *ERRORS,
        f"# HELP mpijob_webhook_request_duration_seconds {LATENCY_HELP}",
        "# TYPE mpijob_webhook_request_duration_seconds histogram",
        *FAILURES,
        *SKIPPED,
    ]


SCRAPE = """
from prometheus_client import generate_latest
from webhook.metrics import WebhookMetrics
metrics = WebhookMetrics()
metrics.observe("mutate", "allowed", 0.0002)
print(generate_latest(metrics.registry).decode())
"""


def scrape_in_a_process(**environment: str) -> str:
    """The exposition of a new process (``prometheus_client`` reads its environment once, at import)."""
    env = {**os.environ, **environment}
    return subprocess.run([sys.executable, "-c", SCRAPE], env=env, capture_output=True, text=True, check=True).stdout


def test_created_series_follow_the_library_switch() -> None:
    """docs/operator-guide.md: ``PROMETHEUS_DISABLE_CREATED_SERIES=true`` turns the ``_created`` series off."""
    assert 'mpijob_webhook_requests_created{operation="mutate",result="allowed"}' in scrape_in_a_process(
        PROMETHEUS_DISABLE_CREATED_SERIES="false")
    text = scrape_in_a_process(PROMETHEUS_DISABLE_CREATED_SERIES="true")
    assert "_created" not in text
    assert 'mpijob_webhook_requests_total{operation="mutate",result="allowed"} 1.0' in text
