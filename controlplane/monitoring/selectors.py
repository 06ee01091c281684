"""The reads behind one Prometheus scrape: a handful of queries whatever the fleet size.

Every number comes from rows the control plane already keeps (hosts, their newest snapshot,
change requests, audit verifications); nothing is counted in request code.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, Min, Q
from django.utils import timezone

from controlplane.accounts.roles import Scope
from controlplane.audit.models import AuditVerification
from controlplane.audit.selectors import verification_latest
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest
from hosts.models import Host, StateSnapshot
from hosts.selectors import newest_snapshot_id

# The snapshot columns a scrape reads: never `raw`, which holds every command's output.
SNAPSHOT_FIELDS = ("id", "host_id", "taken_at", "status", "duration_ms", "parsed")


@dataclass
class HostRow:
    id: int
    name: str
    enabled: bool
    host_key_status: str
    snapshot: StateSnapshot | None
    verdict: str = "unknown"


@dataclass
class FleetMetrics:
    now: dt.datetime
    hosts: list[HostRow]
    probe_window_seconds: int
    probe_outcomes: dict[tuple[int, str], int]  # (host id, status) -> snapshots in the window
    changes: dict[tuple[str, str], int]  # (kind, status) -> change requests, all time
    oldest_waiting: dt.datetime | None  # created_at of the oldest request waiting for approval
    verification: AuditVerification | None


def _seen(scope: Scope | None, field: str) -> Q:
    """The hosts a scrape covers: every host for the scraper (no scope), a person's own."""
    return Q() if scope is None else scope.host_q(field)


def hosts_with_latest_snapshot_lean(scope: Scope | None = None) -> list[HostRow]:
    """Every host (of `scope`) with its newest snapshot, in two queries, without the
    snapshots' raw output.

    Only the columns a scrape reads: at 500 hosts the raw command output would be megabytes per
    scrape. With each host's stored health verdict.
    """
    rows = list(
        Host.objects.filter(_seen(scope, "pk"))
        .annotate(latest_snapshot_id=newest_snapshot_id())
        .order_by("name")
        .values("id", "name", "enabled", "host_key_status", "latest_snapshot_id", "health__verdict")
    )
    ids = [r["latest_snapshot_id"] for r in rows if r["latest_snapshot_id"]]
    snapshots = StateSnapshot.objects.only(*SNAPSHOT_FIELDS).in_bulk(ids)
    return [
        HostRow(
            id=r["id"],
            name=r["name"],
            enabled=r["enabled"],
            host_key_status=r["host_key_status"],
            snapshot=snapshots.get(r["latest_snapshot_id"]),
            verdict=r["health__verdict"] or "unknown",
        )
        for r in rows
    ]


def probe_outcomes_since(
    since: dt.datetime, scope: Scope | None = None
) -> dict[tuple[int, str], int]:
    """Snapshots per host and status taken since `since` (a range scan on taken_at's index)."""
    counts = (
        StateSnapshot.objects.filter(_seen(scope, "host_id"), taken_at__gte=since)
        .values("host_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {(row["host_id"], row["status"]): row["n"] for row in counts}


def change_counts(
    scope: Scope | None = None,
) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], Any]]:
    """Change requests by kind and status, with the oldest creation time of each group."""
    rows = (
        ChangeRequest.objects.filter(_seen(scope, "host_id"))
        .values("kind", "status")
        .annotate(n=Count("id"), oldest=Min("created_at"))
        .order_by()
    )
    counts: dict[tuple[str, str], int] = {}
    oldest: dict[tuple[str, str], Any] = {}
    for row in rows:
        counts[(row["kind"], row["status"])] = row["n"]
        oldest[(row["kind"], row["status"])] = row["oldest"]
    return counts, oldest


def fleet_metrics(now: dt.datetime | None = None, scope: Scope | None = None) -> FleetMetrics:
    """What one scrape shows: of every host for the scraper (no scope), of the hosts a
    person's `scope` sees when they are signed in (counts included)."""
    now = now or timezone.now()
    window = settings.METRICS_PROBE_WINDOW_SECONDS
    changes, oldest = change_counts(scope)
    pending = ChangeStatus.PENDING_APPROVAL
    waiting = [when for (_, status), when in oldest.items() if status == pending]
    return FleetMetrics(
        now=now,
        hosts=hosts_with_latest_snapshot_lean(scope),
        probe_window_seconds=window,
        probe_outcomes=probe_outcomes_since(now - dt.timedelta(seconds=window), scope),
        changes=changes,
        oldest_waiting=min(waiting) if waiting else None,
        verification=verification_latest(),
    )
