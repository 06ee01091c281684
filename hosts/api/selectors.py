"""Reads the host list needs beyond hosts.selectors: one page of hosts, their newest snapshots."""

from __future__ import annotations

from django.db.models import QuerySet

from hosts.models import Host, StateSnapshot
from hosts.selectors import newest_snapshot_id


def hosts_with_latest_snapshot_id() -> QuerySet[Host]:
    """Hosts by name, each annotated with its newest snapshot's id (one query per page; the
    snapshots themselves are fetched in bulk by `snapshots_by_id`)."""
    return Host.objects.select_related("credential").annotate(
        latest_snapshot_id=newest_snapshot_id()
    )


def snapshots_by_id(ids: list[int]) -> dict[int, StateSnapshot]:
    return StateSnapshot.objects.select_related("host").in_bulk(ids)
