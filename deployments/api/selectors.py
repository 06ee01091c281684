"""Reads the change views need beyond deployments.selectors: list filters and the detail."""

from __future__ import annotations

from django.db.models import QuerySet

from deployments.models import ChangeRequest
from deployments.selectors import CHANGE_RELATED


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
