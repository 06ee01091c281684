"""Reads the host list needs beyond hosts.selectors: one page of hosts, their newest snapshots."""

from __future__ import annotations

from django.db.models import OuterRef, QuerySet, Subquery

from hosts.models import Host, StateSnapshot


def hosts_with_latest_snapshot_id() -> QuerySet[Host]:
    """Hosts by name, each annotated with its newest snapshot's id (one query per page; the
    snapshots themselves are fetched in bulk by `snapshots_by_id`)."""
    latest_id = (
        StateSnapshot.objects.filter(host=OuterRef("pk"))
        .order_by("-taken_at", "-id")
        .values("id")[:1]
    )
    return Host.objects.select_related("credential").annotate(
        latest_snapshot_id=Subquery(latest_id)
    )


def snapshots_by_id(ids: list[int]) -> dict[int, StateSnapshot]:
    return StateSnapshot.objects.select_related("host").in_bulk(ids)
