"""GPU history for chart tests: snapshots with their GpuSample rows, minutes apart, in bulk.

The rows are written directly (not through probes) so a test can hold weeks of history with
readings it chose, in seconds.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any

from hosts.models import GpuSample, Host, StateSnapshot

Readings = Callable[[int, dt.datetime], dict[str, Any]]  # (gpu, taken_at) -> GpuSample fields


def flat(gpu: int, taken_at: dt.datetime) -> dict[str, Any]:
    return {
        "memory_used_mib": 48_000 + 1000 * gpu,
        "memory_total_mib": 97_887,
        "power_draw_w": 300.0 + 10 * gpu,
        "utilization_pct": 50 + gpu,
        "temperature_c": 40 + gpu,
    }


def waves(gpu: int, taken_at: dt.datetime) -> dict[str, Any]:
    """Daily load cycles, a little different per GPU: something worth looking at in a chart."""
    hours = taken_at.timestamp() / 3600
    load = 0.5 + 0.45 * math.sin(2 * math.pi * (hours / 24 + gpu / 40))
    return {
        "memory_used_mib": int(97_887 * (0.55 + 0.35 * load + 0.01 * gpu)),
        "memory_total_mib": 97_887,
        "power_draw_w": round(90 + 480 * load + 4 * gpu, 1),
        "utilization_pct": round(100 * load * (0.9 + 0.01 * gpu)),
        "temperature_c": round(34 + 40 * load + gpu / 2),
    }


def make_gpu_history(
    host: Host,
    *,
    times: list[dt.datetime],
    gpus: int = 8,
    readings: Readings = flat,
) -> int:
    """One ok snapshot per time and one sample per GPU of each; returns the samples written."""
    snapshots = StateSnapshot.objects.bulk_create(
        [
            StateSnapshot(
                host=host, taken_at=t, status="ok", trigger="schedule", duration_ms=100,
                parsed={}, digest="",
            )
            for t in times
        ],
        batch_size=2000,
    )  # fmt: skip
    samples = [
        GpuSample(
            host=host, snapshot=s, minute=GpuSample.minute_of(s.taken_at),
            gpu=gpu, **readings(gpu, s.taken_at),
        )
        for s in snapshots
        for gpu in range(gpus)
    ]  # fmt: skip
    GpuSample.objects.bulk_create(samples, batch_size=5000)
    return len(samples)


def every(minutes: int, *, until: dt.datetime, span: dt.timedelta) -> list[dt.datetime]:
    """Times `minutes` apart going back `span` from `until` (oldest first)."""
    count = int(span.total_seconds() // (60 * minutes))
    return [until - dt.timedelta(minutes=minutes * i) for i in range(count, -1, -1)]
