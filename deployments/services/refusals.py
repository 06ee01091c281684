"""The refusal every change rule raises, and the small checks most of them start with."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from controlplane.accounts.roles import has_role
from controlplane.audit import reasons
from controlplane.refusals import Refused
from hosts import services as host_services

from ..models import ChangeRequest


class ChangeRefused(Refused):
    """A rule refused a change. `code` is one of: stale, forbidden, conflict, invalid."""


def stale(exc: host_services.SnapshotNotUsable) -> ChangeRefused:
    return ChangeRefused(exc.message, code="stale", age_seconds=exc.age_seconds, limit=exc.limit)


def require_role(user: Any, role: str, action: str) -> None:
    if not has_role(user, role):
        raise ChangeRefused(f"{action} needs the {role} role", code="forbidden")


def require_reason(reason: str, what: str, *, minimum: int = 1) -> str:
    try:
        return reasons.validate_reason(reason, what=what, minimum=minimum)
    except ValidationError as exc:
        raise ChangeRefused(exc.messages[0]) from exc


def lock_in_status(change: ChangeRequest, expected: str) -> ChangeRequest:
    """The change's row, locked for this transaction, if it is still in `expected`."""
    locked = (
        ChangeRequest.objects.select_for_update()
        .select_related("host", "snapshot")
        .get(pk=change.pk)
    )
    if locked.status != expected:
        raise ChangeRefused(
            f"change #{locked.pk} is {locked.get_status_display()}, not "
            f"{ChangeRequest(status=expected).get_status_display()}",
            code="conflict",
        )
    return locked


def enqueue_on_commit(change: ChangeRequest) -> None:
    from ..tasks import execute_change

    change_id = change.pk
    transaction.on_commit(lambda: execute_change.delay(change_id))
