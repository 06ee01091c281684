"""Reads about hosts and snapshots, shaped for pages, the CLI and the API."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings
from django.core.paginator import Page, Paginator
from django.db.models import Count, F, OuterRef, QuerySet, Subquery
from django.utils import timezone

from .choices import SnapshotStatus, Verdict
from .models import Host, HostHealth, StateSnapshot
from .state import HostState

# Statuses a decision can rest on (a partial one with an acknowledgement).
USABLE_STATUSES = {SnapshotStatus.OK, SnapshotStatus.PARTIAL}

FLEET_PAGE_SIZE = 50


@dataclass
class FleetRow:
    host: Host
    health: HostHealth | None
    snapshot: StateSnapshot | None
    summary: dict[str, Any]
    last_good: dict[str, Any] | None  # for hosts that cannot be read now
    next_probe_in: float | None  # seconds; negative when overdue


def fleet_page(
    *, verdict: str = "", q: str = "", sort: str = "verdict", page: int = 1
) -> tuple[Page[Any], list[FleetRow]]:
    """One page of the fleet with each host's stored verdict and newest snapshot, in a fixed
    number of queries whatever the fleet's size."""
    hosts = Host.objects.select_related("health", "health__last_good_snapshot").annotate(
        newest_snapshot=newest_snapshot_id(),
        newest_integrity=newest_snapshot_id(includes_integrity=True),
    )
    if verdict:
        hosts = hosts.filter(health__verdict=verdict)
    if q:
        hosts = hosts.filter(name__icontains=q)
    orders: dict[str, list[Any]] = {
        "name": ["name"],
        "age": [F("last_probe_at").asc(nulls_first=True), "name"],
        "verdict": [F("health__severity").desc(nulls_first=True), "name"],
    }
    order = orders.get(sort, orders["verdict"])
    paginator = Paginator(hosts.order_by(*order), FLEET_PAGE_SIZE)
    current = paginator.get_page(page)
    now = timezone.now()
    wanted = {
        pk
        for h in current.object_list
        for pk in (h.newest_snapshot, h.newest_integrity)  # type: ignore[attr-defined]
        if pk
    }
    newest = StateSnapshot.objects.in_bulk(list(wanted))
    rows = [
        fleet_row(
            host,
            now,
            newest.get(host.newest_snapshot),  # type: ignore[attr-defined]
            integrity=newest.get(host.newest_integrity),  # type: ignore[attr-defined]
            looked_up=True,
        )
        for host in current.object_list
    ]
    return current, rows


def fleet_row(
    host: Host,
    now: Any = None,
    snapshot: StateSnapshot | None = None,
    *,
    integrity: StateSnapshot | None = None,
    looked_up: bool = False,
) -> FleetRow:
    """A host's row on the fleet page. Its newest snapshot, and the newest that checked the
    engine's files, are looked up here unless the caller did (`looked_up`: None means none)."""
    now = now or timezone.now()
    health = getattr(host, "health", None)
    if not looked_up:
        snapshot = latest_snapshot(host)
        integrity = latest_integrity_snapshot(host)
    last_good = None
    unreadable = snapshot is None or snapshot.status not in ("ok", "partial")
    if health is not None and health.last_good_snapshot is not None and unreadable:
        last_good = snapshot_summary(health.last_good_snapshot)
        last_good["snapshot"] = health.last_good_snapshot
    due = None
    if host.last_probe_at is not None:
        due = host.probe_interval_seconds - (now - host.last_probe_at).total_seconds()
    summary = snapshot_summary(snapshot)
    if summary.get("integrity") is None and integrity is not None:
        # Engine files are checked on their own, slower schedule: show the newest check.
        summary["integrity"] = integrity_summary(integrity.state())
        summary["integrity_age"] = integrity.age_seconds(now)
    return FleetRow(host, health, snapshot, summary, last_good, due)


def fleet_verdict_counts() -> dict[str, int]:
    """How many hosts have each verdict (hosts never judged count as unknown)."""
    counts = dict(HostHealth.objects.values_list("verdict").annotate(n=Count("host")).order_by())
    counts["unknown"] = counts.get("unknown", 0) + Host.objects.filter(health=None).count()
    return {v: counts.get(v, 0) for v in Verdict.values}


def newest_snapshot_id(**filters: Any) -> Subquery:
    """Annotate hosts with this to get each one's newest snapshot id (matching `filters`) in the
    same query."""
    return Subquery(
        StateSnapshot.objects.filter(host=OuterRef("pk"), **filters)
        .order_by("-taken_at", "-id")
        .values("id")[:1]
    )


def latest_snapshot(host: Host) -> StateSnapshot | None:
    return host.snapshots.order_by("-taken_at", "-id").first()


def latest_integrity_snapshot(host: Host) -> StateSnapshot | None:
    """The newest snapshot that checked the engine's installed files."""
    return host.snapshots.filter(includes_integrity=True).order_by("-taken_at", "-id").first()


def snapshot_history(host: Host, limit: int = 50) -> QuerySet[StateSnapshot]:
    return host.snapshots.order_by("-taken_at", "-id")[:limit]


def snapshot_summary(snapshot: StateSnapshot | None) -> dict[str, Any]:
    """The handful of facts a dashboard row or a change form shows."""
    if snapshot is None:
        return {
            "service": "never probed", "model": "", "gpus": [], "inflight": None, "age": None,
            "usable": False, "gpus_unknown": True,
        }  # fmt: skip
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
        "usable": snapshot.status in USABLE_STATUSES,
        # No GPU list because nvidia-smi failed or the host did not answer, not because it has none.
        "gpus_unknown": snapshot.status not in USABLE_STATUSES
        or any(p.section == "gpus" for p in state.problems),
        "stale": snapshot.age_seconds(now) > settings.SNAPSHOT_MAX_AGE_SECONDS,
        "integrity": integrity_summary(state),
    }


def integrity_summary(state: HostState) -> dict[str, Any] | None:
    """The engine check of the host's first unit, as the fleet row and the change form show it
    (None when this snapshot did not check the engine's files)."""
    unit = sorted(state.deployments)[0] if state.deployments else ""
    integrity = state.deployments[unit].integrity if unit else None
    return asdict(integrity) if integrity is not None else None


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


def host_parity(snapshot: StateSnapshot | None) -> dict[str, Any]:
    """What `systemctl status`, `journalctl` and `nvidia-smi` would show, from one snapshot:
    each unit's status, files and journal; each GPU's details beside its readings; who owns
    each GPU process; and how the GPUs reach each other."""
    if snapshot is None:
        return {}
    state = snapshot.state()
    details = {d.index: d for d in state.gpu_details}
    by_uuid = state.gpu_index_by_uuid()
    return {
        "units": [
            {"name": unit, "dep": dep, "status": dep.unit}
            for unit, dep in state.deployments.items()
        ],
        "gpus": [(gpu, details.get(gpu.index)) for gpu in state.gpus],
        "processes": [(app, by_uuid.get(app.gpu_uuid or "")) for app in state.compute_apps],
        "topology": state.topology,
        "driver_version": state.driver_version
        or next((d.driver_version for d in state.gpu_details if d.driver_version), None),
        "cuda_version": state.cuda_version,
        "problems": state.problems,
        # Seconds the host's clock is ahead of the control plane's (negative: behind), as seen
        # by this probe: systemd's timestamps are on the host's clock.
        "clock_skew": (
            round(state.host_time - snapshot.taken_at.timestamp())
            if state.host_time is not None
            else None
        ),
    }
