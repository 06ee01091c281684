"""The audit stream's destinations on /metrics: how far behind each is, and whether it fails,
so an alert fires when the SIEM stops getting the audit trail."""

from __future__ import annotations

from collections.abc import Iterator

from django.conf import settings
from prometheus_client.core import GaugeMetricFamily, Metric

from controlplane.audit.streaming.selectors import stream_statuses


def audit_stream_families() -> Iterator[Metric]:
    def gauge(name: str, text: str) -> GaugeMetricFamily:
        return GaugeMetricFamily(f"controlplane_audit_stream_{name}", text, labels=["destination"])

    lag = gauge("lag_events", "Audit events appended but not yet taken by the destination.")
    age = gauge(
        "lag_seconds",
        "Age of the oldest audit event the destination has not taken yet (0 when caught up).",
    )
    delivered = gauge("delivered_seq", "The last audit event (seq) the destination took.")
    failing = gauge(
        "failing", "1 while the destination's last attempt failed (its error: audit page)."
    )
    attempts = gauge("failed_attempts", "Failed attempts since the destination's last success.")
    again = gauge(
        "redelivered_events", "Events sent to the destination again, flagged, since it was added."
    )
    # Only destinations in AUDIT_STREAMS have series: with none, a scrape asks nothing more.
    for status in stream_statuses() if settings.AUDIT_STREAMS else []:
        if not status.configured:
            continue
        labels = [status.name]
        lag.add_metric(labels, float(status.lag_events))
        age.add_metric(labels, status.lag_seconds)
        delivered.add_metric(labels, float(status.delivered_seq))
        failing.add_metric(labels, float(status.failing))
        attempts.add_metric(labels, float(status.attempts))
        again.add_metric(labels, float(status.redelivered))
    yield from (lag, age, delivered, failing, attempts, again)
