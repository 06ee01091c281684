"""Reads the API needs beyond the apps' own selectors: tokens, and list shapes that paginate."""

from __future__ import annotations

from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from deployments.models import ChangeRequest
from deployments.selectors import CHANGE_RELATED
from hosts.models import Host, StateSnapshot

from .models import APIToken


def tokens_of(*, user: Any) -> QuerySet[APIToken]:
    return APIToken.objects.filter(user=user).order_by("-created_at", "-id")


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


def changes_filtered(*, status: str = "", host: str = "") -> QuerySet[ChangeRequest]:
    qs = ChangeRequest.objects.select_related(*CHANGE_RELATED)
    if status:
        qs = qs.filter(status=status)
    if host:
        qs = qs.filter(host__name=host)
    return qs


def change_with_history(pk: int) -> ChangeRequest | None:
    """A change with its steps and approvals, for its detail answer."""
    return (
        ChangeRequest.objects.select_related(*CHANGE_RELATED)
        .prefetch_related("steps", "approvals")
        .filter(pk=pk)
        .first()
    )
