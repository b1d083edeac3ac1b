"""Prometheus metrics of the webhook, in a registry of its own (one per application)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from webhook.tls import CertificateReloader

# Admission takes well under a millisecond in the process; the API server's own histogram starts at 5 ms.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
LABELS = ("operation", "result")
# Each operation's error count is exported from the start, at 0: the MPIJobWebhookErrors alert's rate() then has a
# series to compute while nothing fails (and a renamed metric is seen as missing, not as a quiet 0).
OPERATIONS = ("mutate", "validate", "convert", "mutate_pod")
# Why the pod webhook left a worker Job's pod without its rank label (webhook/pod_index.py), each exported from 0.
REPLICA_INDEX_SKIP_REASONS = ("no_index", "malformed_index", "malformed_offset", "not_a_pod")


@dataclass
class WebhookMetrics:
    """``mpijob_webhook_requests_total`` and the ``mpijob_webhook_request_duration_seconds`` histogram by
    (operation, result), and the serving certificate's metrics once ``watch_certificate`` is called."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.requests = Counter(
            "mpijob_webhook_requests",
            "Admission and conversion requests by operation (mutate, validate, convert, mutate_pod) and result "
            "(allowed, patched, denied, converted, failed, bad_request, too_large, error).",
            LABELS, registry=self.registry)
        self.latency = Histogram(
            "mpijob_webhook_request_duration_seconds",
            "Time to answer an admission or conversion request, from the first body byte to the response.",
            LABELS, buckets=LATENCY_BUCKETS, registry=self.registry)
        self.conversion_failures = Counter(
            "mpijob_webhook_conversion_failures",
            "ConversionReviews answered with result Failed (an object that cannot be converted, a body that is not "
            "a ConversionReview or is over a limit, an internal error).",
            registry=self.registry)
        self.replica_index_skipped = Counter(
            "mpijob_webhook_replica_index_skipped",
            "Pods of an IndexedJob worker Job allowed without the rank label training.kubeflow.org/replica-index, by "
            "reason (no_index, malformed_index, malformed_offset, not_a_pod): Kueue's topology-aware placement then "
            "falls back to ignoring ranks.",
            ["reason"], registry=self.registry)
        for operation in OPERATIONS:
            self.requests.labels(operation, "error")
        for reason in REPLICA_INDEX_SKIP_REASONS:
            self.replica_index_skipped.labels(reason)

    def watch_certificate(self, reloader: CertificateReloader) -> None:
        """Export the serving certificate's reloads, failures and expiry."""
        self.registry.register(_CertificateCollector(reloader))

    def observe(self, operation: str, result: str, seconds: float) -> None:
        """Count one answered admission request and how long it took."""
        self.requests.labels(operation, result).inc()
        self.latency.labels(operation, result).observe(seconds)


class _CertificateCollector(Collector):
    """The reloader's own counts and the loaded certificate's expiry, read at each scrape (``prometheus_client``'s
    custom collector API: the reloader keeps the figures, this only exports them)."""

    def __init__(self, reloader: CertificateReloader) -> None:
        self.reloader = reloader

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        yield CounterMetricFamily(
            "mpijob_webhook_certificate_loads",
            "Serving certificate pairs loaded (the first load included).",
            value=self.reloader.reload_count,
        )
        yield CounterMetricFamily(
            "mpijob_webhook_certificate_load_failures",
            "Changed certificate files that could not be loaded (the previous pair kept serving).",
            value=self.reloader.failure_count,
        )
        loaded = self.reloader.loaded
        if loaded is not None:
            yield GaugeMetricFamily(
                "mpijob_webhook_certificate_expiry_timestamp_seconds",
                "When the serving certificate expires (Unix time).",
                value=loaded.not_after.timestamp(),
            )
