"""Reads the host list needs beyond hosts.selectors: one page of hosts, their newest snapshots."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet

from controlplane.accounts.models import HostGroup
from hosts.models import Host, StateSnapshot
from hosts.scope import hosts_visible
from hosts.selectors import newest_snapshot_id


def hosts_with_latest_snapshot_id(*, user: Any, group: str = "") -> QuerySet[Host]:
    """The hosts `user` sees (of one host group, by name, when `group` says), each annotated
    with its newest snapshot's id and carrying its groups' names (one query per page for each;
    the snapshots themselves are fetched in bulk by `snapshots_by_id`)."""
    hosts = hosts_visible(user, Host.objects.select_related("credential"))
    if group:
        hosts = hosts.filter(groups__name=group)
    names = HostGroup.objects.order_by("name").only("name")
    return hosts.annotate(latest_snapshot_id=newest_snapshot_id()).prefetch_related(
        Prefetch("groups", queryset=names)
    )


def snapshots_by_id(ids: list[int]) -> dict[int, StateSnapshot]:
    return StateSnapshot.objects.select_related("host").in_bulk(ids)
