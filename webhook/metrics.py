"""Prometheus metrics of the webhook, in a registry of its own (one per application)."""

from __future__ import annotations

import os
import time
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from webhook.tls import CertificateReloader

# Admission takes well under a millisecond in the process; the API server's own histogram starts at 5 ms.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
REQUESTS = "mpijob_webhook_requests"
REQUESTS_HELP = ("Admission requests by operation (mutate, validate) and result "
                 "(allowed, patched, denied, bad_request, too_large, error).")
LATENCY = "mpijob_webhook_request_duration_seconds"
LATENCY_HELP = "Time to answer an admission request, from the first body byte to the response."


@dataclass
class WebhookMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.admissions = AdmissionStats()
        self.registry.register(self.admissions)

    def watch_certificate(self, reloader: CertificateReloader) -> None:
        """Export the serving certificate's reloads, failures and expiry."""
        self.registry.register(_CertificateCollector(reloader))

    def observe(self, operation: str, result: str, seconds: float) -> None:
        self.admissions.observe(operation, result, seconds)


class _Series:
    __slots__ = ("buckets", "created", "total_seconds")

    def __init__(self) -> None:
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # the last one is +Inf
        self.total_seconds = 0.0
        self.created = time.time()


class AdmissionStats(Collector):
    """``mpijob_webhook_requests_total`` and the ``mpijob_webhook_request_duration_seconds`` histogram.

    The same series, samples and ``_created`` gauges as a ``prometheus_client`` Counter and Histogram with
    the labels (operation, result) would export, for a fraction of their cost on every request: a count per
    bucket, without a lock. Every admission request is answered on the event loop's thread, and ``/metrics``
    is collected there too, so no two calls overlap.
    """

    def __init__(self) -> None:
        self._series: dict[tuple[str, str], _Series] = {}

    def observe(self, operation: str, result: str, seconds: float) -> None:
        series = self._series.get((operation, result))
        if series is None:
            series = self._series[operation, result] = _Series()
        series.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1  # a bucket counts values <= its bound
        series.total_seconds += seconds

    def collect(self) -> Iterator[Metric]:
        requests = Metric(REQUESTS, REQUESTS_HELP, "counter")
        latency = Metric(LATENCY, LATENCY_HELP, "histogram")
        with_created = _created_series_enabled()
        for (operation, result), series in list(self._series.items()):
            labels = {"operation": operation, "result": result}
            cumulative = 0
            for bound, count in zip(_BOUNDS, series.buckets, strict=True):
                cumulative += count
                latency.add_sample(f"{LATENCY}_bucket", {**labels, "le": bound}, cumulative)
            latency.add_sample(f"{LATENCY}_count", labels, cumulative)
            latency.add_sample(f"{LATENCY}_sum", labels, series.total_seconds)
            requests.add_sample(f"{REQUESTS}_total", labels, cumulative)
            if with_created:
                requests.add_sample(f"{REQUESTS}_created", labels, series.created)
                latency.add_sample(f"{LATENCY}_created", labels, series.created)
        yield requests
        yield latency


_BOUNDS: list[str] = [floatToGoString(bound) for bound in (*LATENCY_BUCKETS, float("inf"))]  # type: ignore[no-untyped-call]


def _created_series_enabled() -> bool:
    """False when ``PROMETHEUS_DISABLE_CREATED_SERIES`` is set, as ``prometheus_client``'s own metrics read it."""
    return os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "False").lower() not in ("true", "1", "t")


class _CertificateCollector(Collector):
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
