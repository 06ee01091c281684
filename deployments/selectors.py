"""Reads for change pages and queues."""

from __future__ import annotations

from django.db.models import QuerySet

from hosts.models import Host

from .choices import ChangeStatus
from .models import ChangeRequest

CHANGE_RELATED = (
    "host",
    "deployment",
    "snapshot",
    "from_revision__model",
    "target_revision__model",
    "before_snapshot",
    "after_snapshot",
    "failure_snapshot",
)


def approvals_waiting() -> QuerySet[ChangeRequest]:
    """The approvals queue, oldest first."""
    return (
        ChangeRequest.objects.filter(status=ChangeStatus.PENDING_APPROVAL)
        .select_related(*CHANGE_RELATED)
        .order_by("created_at")
    )


def recent_changes(host: Host | None = None, limit: int = 50) -> QuerySet[ChangeRequest]:
    qs = ChangeRequest.objects.select_related(*CHANGE_RELATED).order_by("-created_at")
    if host is not None:
        qs = qs.filter(host=host)
    return qs[:limit]


def change_for_page(pk: int) -> ChangeRequest:
    return ChangeRequest.objects.select_related(*CHANGE_RELATED).get(pk=pk)
