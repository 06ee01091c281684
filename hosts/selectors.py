"""Reads about hosts and snapshots, shaped for pages, the CLI and the API."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from .models import Host, StateSnapshot


def hosts_with_latest_snapshot() -> list[tuple[Host, StateSnapshot | None]]:
    """Every host with its newest snapshot, in two queries whatever the fleet size."""
    latest_id = (
        StateSnapshot.objects.filter(host=OuterRef("pk"))
        .order_by("-taken_at", "-id")
        .values("id")[:1]
    )
    hosts = list(Host.objects.annotate(latest_snapshot_id=Subquery(latest_id)).order_by("name"))
    ids = [h.latest_snapshot_id for h in hosts if h.latest_snapshot_id]  # type: ignore[attr-defined]
    snapshots = StateSnapshot.objects.in_bulk(ids)
    return [(h, snapshots.get(h.latest_snapshot_id)) for h in hosts]  # type: ignore[attr-defined]


def latest_snapshot(host: Host) -> StateSnapshot | None:
    return host.snapshots.order_by("-taken_at", "-id").first()


def snapshot_history(host: Host, limit: int = 50) -> QuerySet[StateSnapshot]:
    return host.snapshots.order_by("-taken_at", "-id")[:limit]


def _first_deployment(parsed: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    deployments = parsed.get("deployments") or {}
    if not deployments:
        return "", {}
    unit = sorted(deployments)[0]
    return unit, deployments[unit]


def snapshot_summary(snapshot: StateSnapshot | None) -> dict[str, Any]:
    """The handful of facts a dashboard row or a change form shows."""
    if snapshot is None:
        return {"service": "never probed", "model": "", "gpus": [], "inflight": None, "age": None}
    parsed = snapshot.parsed or {}
    unit, dep = _first_deployment(parsed)
    unit_state = dep.get("unit") or {}
    server = dep.get("server") or {}
    gpus = []
    for gpu in parsed.get("gpus") or []:
        used, total = gpu.get("memory_used_mib"), gpu.get("memory_total_mib")
        pct = round(100 * used / total) if used is not None and total else None
        gpus.append({**gpu, "memory_pct": pct})
    running = server.get("requests_running")
    waiting = server.get("requests_waiting")
    inflight = None if running is None and waiting is None else (running or 0) + (waiting or 0)
    service = unit_state.get("active_state") or ("no deployment" if not unit else "unknown")
    if unit_state.get("sub_state") and unit_state.get("active_state"):
        service = f"{unit_state['active_state']} ({unit_state['sub_state']})"
    now = timezone.now()
    return {
        "unit": unit,
        "service": service,
        "active_state": unit_state.get("active_state"),
        "active_since": unit_state.get("active_enter_timestamp"),
        "main_pid": unit_state.get("main_pid"),
        "healthy": server.get("healthy"),
        "model": ", ".join(server.get("models") or []),
        "model_root": ", ".join(server.get("model_roots") or []),
        "gpus": gpus,
        "power_w": round(sum(g.get("power_draw_w") or 0 for g in gpus), 1) if gpus else None,
        "utilization_pct": (
            round(sum(g.get("utilization_pct") or 0 for g in gpus) / len(gpus)) if gpus else None
        ),
        "inflight": inflight,
        "age": snapshot.age_seconds(now),
        "stale": snapshot.age_seconds(now) > settings.SNAPSHOT_MAX_AGE_SECONDS,
        "integrity": (dep.get("integrity") if dep else None),
    }


def snapshot_as_dict(snapshot: StateSnapshot) -> dict[str, Any]:
    return {
        "id": snapshot.pk,
        "host": snapshot.host.name,
        "taken_at": snapshot.taken_at.isoformat(),
        "age_seconds": round(snapshot.age_seconds(), 3),
        "status": snapshot.status,
        "trigger": snapshot.trigger,
        "duration_ms": snapshot.duration_ms,
        "digest": snapshot.digest,
        "error": snapshot.error,
        "material_fingerprint": snapshot.material_fingerprint(),
        "parsed": snapshot.parsed,
    }


def gpu_series(host: Host, limit: int = 120) -> dict[str, Any]:
    """Memory and power over the last `limit` snapshots, oldest first, for the host chart."""
    rows = list(
        host.snapshots.filter(status__in=["ok", "partial"])
        .order_by("-taken_at", "-id")
        .values("taken_at", "parsed")[:limit]
    )[::-1]
    points = []
    for row in rows:
        gpus = (row["parsed"] or {}).get("gpus") or []
        used = sum(g.get("memory_used_mib") or 0 for g in gpus)
        total = sum(g.get("memory_total_mib") or 0 for g in gpus)
        power = sum(g.get("power_draw_w") or 0 for g in gpus)
        points.append(
            {
                "t": row["taken_at"].isoformat(),
                "memory_pct": round(100 * used / total, 1) if total else None,
                "power_w": round(power, 1),
            }
        )
    return {"points": points}
