"""A small server-rendered SVG chart: no JavaScript charting library to ship or audit."""

from __future__ import annotations

from typing import Any

WIDTH, HEIGHT, PAD = 600, 160, 24


def _polyline(values: list[float | None], top: float) -> str:
    n = len(values)
    points = []
    for i, value in enumerate(values):
        if value is None:
            continue
        x = PAD + (WIDTH - 2 * PAD) * (i / max(1, n - 1))
        y = HEIGHT - PAD - (HEIGHT - 2 * PAD) * (value / top if top else 0)
        points.append(f"{x:.1f},{y:.1f}")
    return " ".join(points)


def gpu_chart(series: dict[str, Any]) -> dict[str, Any]:
    """GPU memory (% of total) and total power (W) over time, both scaled to the chart."""
    points = series["points"]
    memory = [p["memory_pct"] for p in points]
    power = [p["power_w"] for p in points]
    power_top = max([p for p in power if p is not None] or [0]) * 1.1 or 1.0
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "count": len(points),
        "memory_line": _polyline(memory, 100.0),
        "power_line": _polyline(power, power_top),
        "power_top": round(power_top),
        "first": points[0]["t"] if points else None,
        "last": points[-1]["t"] if points else None,
    }
