"""A change's row, locked for the transaction that decides on it."""

from __future__ import annotations

from ..models import ChangeRequest
from .refusals import ChangeRefused


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
