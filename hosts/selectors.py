"""Reads about hosts and snapshots, shaped for pages, the CLI and the API."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from .models import Host, StateSnapshot
from .state import HostState


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


def snapshot_summary(snapshot: StateSnapshot | None) -> dict[str, Any]:
    """The handful of facts a dashboard row or a change form shows."""
    if snapshot is None:
        return {"service": "never probed", "model": "", "gpus": [], "inflight": None, "age": None}
    state = snapshot.state()
    unit = sorted(state.deployments)[0] if state.deployments else ""
    unit_state = state.unit_state(unit)
    server = state.server(unit)
    gpus = []
    for gpu in state.gpus:
        used, total = gpu.memory_used_mib, gpu.memory_total_mib
        pct = round(100 * used / total) if used is not None and total else None
        gpus.append({**asdict(gpu), "memory_pct": pct})
    service = unit_state.active_state or ("no deployment" if not unit else "unknown")
    if unit_state.sub_state and unit_state.active_state:
        service = f"{unit_state.active_state} ({unit_state.sub_state})"
    now = timezone.now()
    integrity = state.deployments[unit].integrity if unit else None
    return {
        "unit": unit,
        "service": service,
        "active_state": unit_state.active_state,
        "active_since": unit_state.active_enter_timestamp,
        "main_pid": unit_state.main_pid,
        "healthy": server.healthy if unit else None,
        "model": ", ".join(server.models),
        "model_root": ", ".join(server.model_roots),
        "gpus": gpus,
        "power_w": round(sum(g.power_draw_w or 0 for g in state.gpus), 1) if gpus else None,
        "utilization_pct": (
            round(sum(g.utilization_pct or 0 for g in state.gpus) / len(gpus)) if gpus else None
        ),
        "inflight": state.inflight(unit) if unit else None,
        "age": snapshot.age_seconds(now),
        "stale": snapshot.age_seconds(now) > settings.SNAPSHOT_MAX_AGE_SECONDS,
        "integrity": asdict(integrity) if integrity is not None else None,
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
        gpus = HostState.from_json(row["parsed"]).gpus
        used = sum(g.memory_used_mib or 0 for g in gpus)
        total = sum(g.memory_total_mib or 0 for g in gpus)
        power = sum(g.power_draw_w or 0 for g in gpus)
        points.append(
            {
                "t": row["taken_at"].isoformat(),
                "memory_pct": round(100 * used / total, 1) if total else None,
                "power_w": round(power, 1),
            }
        )
    return {"points": points}
