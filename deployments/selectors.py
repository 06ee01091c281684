"""Reads for change pages and queues."""

from __future__ import annotations

from django.core.paginator import Page
from django.db.models import QuerySet

from controlplane.paging import numbered_page
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
    """The approvals queue, oldest first (index change_status_created), with only the columns
    its rows show: no snapshot is read, so a row costs no JSON however big the state was."""
    return (
        ChangeRequest.objects.filter(status=ChangeStatus.PENDING_APPROVAL)
        .select_related("host", "deployment", "target_revision__model")
        .only(
            "created_at",
            "requested_by_name",
            "kind",
            "reason",
            "host__name",
            "deployment__unit",
            "target_revision__model__name",
            "target_revision__model__variant",
        )
        .order_by("created_at", "pk")
    )


def approvals_page(*, page: str | None = None) -> tuple[Page[ChangeRequest], str]:
    """One page of the approvals queue, and a note when `page` was not a page of it."""
    return numbered_page(approvals_waiting(), page)


def recent_changes(host: Host | None = None, limit: int = 50) -> QuerySet[ChangeRequest]:
    qs = ChangeRequest.objects.select_related(*CHANGE_RELATED).order_by("-created_at")
    if host is not None:
        qs = qs.filter(host=host)
    return qs[:limit]


def change_for_page(pk: int) -> ChangeRequest:
    return ChangeRequest.objects.select_related(*CHANGE_RELATED).get(pk=pk)
