"""GPU history for the host page's charts: per-GPU series, downsampled by the database.

A host probed every minute has 10,080 snapshots a week, 80,640 GPU samples. The browser gets at
most a few hundred points per GPU: one GROUP BY over `GpuSample` averages each bucket, so a
window costs one query whatever the number of rows (and one more for its GPU events).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db.models import Avg, F, Max
from django.utils import timezone

from .choices import READ_STATUSES
from .models import GpuSample, Host, StateSnapshot
from .xid_catalog import xid_name


@dataclass(frozen=True)
class Window:
    label: str
    bucket_minutes: int
    buckets: int  # bucket_minutes * buckets covers the window; at most ~170 points per GPU


WINDOWS: dict[str, Window] = {
    "1h": Window("1 h", bucket_minutes=1, buckets=60),
    "24h": Window("24 h", bucket_minutes=15, buckets=96),
    "7d": Window("7 d", bucket_minutes=60, buckets=168),
}
DEFAULT_WINDOW = "24h"

UNITS = {
    "memory_pct": "%",  # bucket average of used / total
    "memory_max_pct": "%",  # bucket peak: what headroom is about, averaging hides spikes
    "power_w": "W",
    "utilization_pct": "%",
    "temperature_c": "°C",
}
# metric -> the aggregate (in _bucket_rows) it is read from, for the plain averages
_AVERAGED = {"power_w": "power", "utilization_pct": "utilization", "temperature_c": "temperature"}


class UnknownWindow(ValueError):
    def __init__(self, window: str) -> None:
        super().__init__(
            f"unknown window {window!r}: use one of {', '.join(WINDOWS)} (e.g. ?window=24h)"
        )


def window_choices(requested: str | None, host: Host | None = None) -> dict[str, Any]:
    """The window a page opens on (for a missing or unknown one, the one `host`'s samples
    fill: window_with_data) and its links."""
    if requested in WINDOWS:
        current = str(requested)
    else:
        current = window_with_data(host) if host is not None else DEFAULT_WINDOW
    links = [{"key": k, "label": w.label, "current": k == current} for k, w in WINDOWS.items()]
    return {"current": current, "links": links}


def window_with_data(host: Host, *, now: dt.datetime | None = None) -> str:
    """A day, unless every sample of the host is from the last hour (a host added minutes ago,
    a fresh demo without history): then the hour, where its readings are, rather than a day of
    empty grid with a sliver at its end. One index lookup (gpusample_host_chart)."""
    oldest = (
        GpuSample.objects.filter(host=host).order_by("minute").values_list("minute", flat=True)
    ).first()
    hour_ago = GpuSample.minute_of(now or timezone.now()) - 60
    return "1h" if oldest is not None and oldest >= hour_ago else DEFAULT_WINDOW


def gpu_chart_series(host: Host, window: str, *, now: dt.datetime | None = None) -> dict[str, Any]:
    """Per-GPU memory, power, utilisation and temperature over a window, JSON-ready.

    `t` holds each bucket's start (epoch seconds, UTC), every bucket of the window whether or
    not it has samples; `series[metric][gpu]` is aligned with it, None where the host was not
    sampled (a gap in the line rather than a line drawn across an outage); `events` the GPU
    events to mark on them. Two queries: the buckets, and the newest snapshot.
    """
    if window not in WINDOWS:
        raise UnknownWindow(window)
    spec = WINDOWS[window]
    size = spec.bucket_minutes
    # Buckets are aligned to whole multiples of their size (the hour, the quarter hour), so the
    # same sample lands in the same bucket on every request; the last one is still filling.
    now_minute = GpuSample.minute_of(now or timezone.now())
    last = now_minute // size
    first = last - spec.buckets + 1
    rows = _bucket_rows(host, size, first * size, now_minute + 1)
    gpus = sorted({row["gpu"] for row in rows})
    series: dict[str, dict[str, list[float | None]]] = {
        metric: {str(g): [None] * spec.buckets for g in gpus} for metric in UNITS
    }
    totals: dict[str, int] = {}
    for row in rows:
        i, gpu = row["bucket"] - first, str(row["gpu"])
        total = row["memory_total"]
        if total:
            totals[gpu] = max(totals.get(gpu, 0), total)
            series["memory_pct"][gpu][i] = _pct(row["memory_used"], total)
            series["memory_max_pct"][gpu][i] = _pct(row["memory_peak"], total)
        for metric, column in _AVERAGED.items():
            series[metric][gpu][i] = _round(row[column])
    return {
        "window": window,
        "bucket_seconds": size * 60,
        # so the page can tell a missed probe or two (drawn across) from an outage (a gap)
        "probe_interval_seconds": host.probe_interval_seconds,
        "t": [(first + i) * size * 60 for i in range(spec.buckets)],
        "gpus": gpus,
        "series": series,
        "units": UNITS,
        "memory_total_mib": totals,
        "events": gpu_events(host, first * size * 60, (now_minute + 1) * 60),
    }


def gpu_events(host: Host, start: int, end: int) -> list[dict[str, Any]]:
    """The Xid events of the host's newest readable snapshot (its current boot's, newest 50)
    that fall in [start, end), for markers on the charts: time, GPU (None: unknown), label."""
    snapshot = (
        StateSnapshot.objects.filter(host=host, status__in=READ_STATUSES)
        .order_by("-taken_at", "-id")
        .first()
    )
    if snapshot is None:
        return []
    events = []
    for event in snapshot.state().xid_events:
        try:
            at = int(dt.datetime.fromisoformat(event.at or "").timestamp())
        except ValueError:
            continue
        if start <= at < end:
            label = f"Xid {event.code}: {xid_name(event.code)}"
            events.append({"t": at, "gpu": event.gpu_index, "label": label})
    return events


def _bucket_rows(host: Host, size: int, start: int, end: int) -> list[dict[str, Any]]:
    """One row per (bucket, GPU) for minutes in [start, end), aggregated by the database.

    `minute / size` is integer division on both PostgreSQL and SQLite (integer operands), and
    the filter is an index-only range scan of `gpusample_host_chart` (host, minute, ...).
    Minutes after now (a clock that ran ahead) are left out rather than shown as the present.
    """
    return list(
        GpuSample.objects.filter(host=host, minute__gte=start, minute__lt=end)
        .annotate(bucket=F("minute") / size)
        .values("bucket", "gpu")
        .annotate(
            memory_used=Avg("memory_used_mib"),
            memory_peak=Max("memory_used_mib"),
            memory_total=Max("memory_total_mib"),
            power=Avg("power_draw_w"),
            utilization=Avg("utilization_pct"),
            temperature=Avg("temperature_c"),
        )
        .order_by()
    )


def _pct(part: Any, total: int) -> float | None:
    return None if part is None else _round(100 * float(part) / total)


def _round(value: Any) -> float | None:
    # float(): PostgreSQL's AVG of an integer column is numeric (a Decimal), JSON wants floats
    return None if value is None else round(float(value), 1)
