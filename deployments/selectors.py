"""Reads for change pages and queues."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page
from django.db.models import QuerySet

from controlplane.paging import numbered_page
from hosts.scope import rows_visible

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


def approvals_waiting(*, user: Any) -> QuerySet[ChangeRequest]:
    """The approvals queue of the hosts `user` sees, oldest first (index
    change_status_created), with only the columns its rows show: no snapshot is read, so a row
    costs no JSON however big the state was."""
    return (
        rows_visible(user, ChangeRequest.objects.filter(status=ChangeStatus.PENDING_APPROVAL))
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


def approvals_page(*, user: Any, page: str | None = None) -> tuple[Page[ChangeRequest], str]:
    """One page of the approvals queue, and a note when `page` was not a page of it."""
    return numbered_page(approvals_waiting(user=user), page)


def recent_changes(*, user: Any, limit: int = 50) -> QuerySet[ChangeRequest]:
    """The newest changes of the hosts `user` sees."""
    qs = ChangeRequest.objects.select_related(*CHANGE_RELATED).order_by("-created_at")
    return rows_visible(user, qs)[:limit]


def change_for_page(pk: int, *, user: Any) -> ChangeRequest:
    """A change, if `user` sees its host (ChangeRequest.DoesNotExist otherwise)."""
    return rows_visible(user, ChangeRequest.objects.select_related(*CHANGE_RELATED)).get(pk=pk)
