"""A change request's lifecycle: the one place that writes its status.

    pending_approval -> queued | rejected | cancelled | drifted
    queued           -> running | cancelled | drifted
    running          -> succeeded | failed | rolled_back | drifted | cancelled | interrupted

Each move is a conditional UPDATE on the status the caller expects, so two processes racing for
the same row cannot both win, and it writes its audit event in the same transaction. Final
statuses have no way out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from controlplane.audit import services as audit
from hosts.models import StateSnapshot

from .choices import FINAL_STATUSES, ChangeStatus
from .models import ChangeRequest

S = ChangeStatus
TRANSITIONS: dict[str, frozenset[str]] = {
    S.PENDING_APPROVAL: frozenset({S.QUEUED, S.REJECTED, S.CANCELLED, S.DRIFTED}),
    S.QUEUED: frozenset({S.RUNNING, S.CANCELLED, S.DRIFTED}),
    S.RUNNING: frozenset(
        {S.SUCCEEDED, S.FAILED, S.ROLLED_BACK, S.DRIFTED, S.CANCELLED, S.INTERRUPTED}
    ),
    **{final: frozenset() for final in FINAL_STATUSES},
}


class IllegalTransition(ValueError):
    """Code asked for a move the lifecycle does not have (a bug, not a race)."""


def initial_status(*, needs_approval: bool) -> str:
    """The status a new request is created in."""
    return S.PENDING_APPROVAL if needs_approval else S.QUEUED


def allowed(source: str, target: str) -> bool:
    return target in TRANSITIONS.get(source, frozenset())


def change_transition(
    *,
    change: ChangeRequest,
    source: str | Iterable[str],
    target: str,
    reason: str = "",
    action: str | None = None,
    actor: Any = None,
    snapshot: StateSnapshot | None = None,
    data: dict[str, Any] | None = None,
    fields: dict[str, Any] | None = None,
    now: dt.datetime | None = None,
) -> bool:
    """Move `change` from `source` to `target` and record `action` in the audit log.

    Returns False, writing nothing, when the row is no longer in `source` (another process got
    there first). Raises IllegalTransition for a move the table does not allow, and lets the
    database's IntegrityError through (one active job per host) for the caller to explain.
    `fields` are written in the same UPDATE (drift report, started_at, ...).
    """
    sources = [source] if isinstance(source, str) else list(source)
    for origin in sources:
        if not allowed(origin, target):
            raise IllegalTransition(f"a change cannot go from {origin} to {target}")
    now = now or timezone.now()
    updates: dict[str, Any] = {"status": target, **(fields or {})}
    if target == S.RUNNING:
        updates.setdefault("started_at", now)
    if target in FINAL_STATUSES:
        updates.update(finished_at=now, status_reason=reason[:4000])
    with transaction.atomic():
        moved = ChangeRequest.objects.filter(pk=change.pk, status__in=sources).update(**updates)
        if not moved:
            return False
        for name, value in updates.items():
            setattr(change, name, value)
        if action is not None:
            audit.record(
                action=action,
                actor=actor,
                target=change,
                host=change.host,
                snapshot=snapshot,
                correlation_id=change.correlation_id,
                data=data,
            )
    return True
