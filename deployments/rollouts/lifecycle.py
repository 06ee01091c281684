"""A rollout's lifecycle and its hosts': the one place that writes either status.

Rollout:
    pending_approval -> approved | rejected | aborted
    approved         -> running | aborted | failed        (failed: the approval lapsed first)
    running          -> paused | halting | succeeded | aborted | failed
    paused           -> running | halting | aborted | failed
    halting          -> halted   (once the failed wave's hosts are rolled back)

A host of a rollout:
    pending          -> running | skipped | not_reached
    running          -> succeeded | failed | skipped | rolled_back
    succeeded|failed -> rollback_pending
    rollback_pending -> rolling_back | rollback_failed
    rolling_back     -> rolled_back | rollback_failed

Each move is a conditional UPDATE on the status the caller expects, with its audit event in the
same transaction, as deployments.lifecycle does for a change. A halting rollout cannot be
aborted: rolling back the wave that failed is what keeps the fleet on what passed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from controlplane.audit import services as audit

from .choices import FINAL_ROLLOUT_STATUSES, RolloutHostStatus, RolloutStatus
from .models import Rollout, RolloutHost

R = RolloutStatus
TRANSITIONS: dict[str, frozenset[str]] = {
    R.PENDING_APPROVAL: frozenset({R.APPROVED, R.REJECTED, R.ABORTED}),
    R.APPROVED: frozenset({R.RUNNING, R.ABORTED, R.FAILED}),
    R.RUNNING: frozenset({R.PAUSED, R.HALTING, R.SUCCEEDED, R.ABORTED, R.FAILED}),
    R.PAUSED: frozenset({R.RUNNING, R.HALTING, R.ABORTED, R.FAILED}),
    R.HALTING: frozenset({R.HALTED}),
    **{final: frozenset() for final in FINAL_ROLLOUT_STATUSES},
}

H = RolloutHostStatus
HOST_TRANSITIONS: dict[str, frozenset[str]] = {
    H.PENDING: frozenset({H.RUNNING, H.SKIPPED, H.NOT_REACHED}),
    H.RUNNING: frozenset({H.SUCCEEDED, H.FAILED, H.SKIPPED, H.ROLLED_BACK}),
    H.SUCCEEDED: frozenset({H.ROLLBACK_PENDING}),
    H.FAILED: frozenset({H.ROLLBACK_PENDING}),
    H.ROLLBACK_PENDING: frozenset({H.ROLLING_BACK, H.ROLLBACK_FAILED}),
    H.ROLLING_BACK: frozenset({H.ROLLED_BACK, H.ROLLBACK_FAILED}),
    H.SKIPPED: frozenset(),
    H.NOT_REACHED: frozenset(),
    H.ROLLED_BACK: frozenset(),
    H.ROLLBACK_FAILED: frozenset(),
}
# A host is done with once it is in one of these (finished_at is set).
HOST_FINAL = frozenset(s for s, targets in HOST_TRANSITIONS.items() if not targets) | {
    H.SUCCEEDED,
    H.FAILED,
}


class IllegalTransition(ValueError):
    """Code asked for a move the table does not have (a bug, not a race)."""


def allowed(source: str, target: str) -> bool:
    return target in TRANSITIONS.get(source, frozenset())


def host_allowed(source: str, target: str) -> bool:
    return target in HOST_TRANSITIONS.get(source, frozenset())


def _sources(source: str | Iterable[str]) -> list[str]:
    return [source] if isinstance(source, str) else list(source)


def rollout_transition(
    *,
    rollout: Rollout,
    source: str | Iterable[str],
    target: str,
    action: str,
    reason: str = "",
    actor: Any = None,
    data: dict[str, Any] | None = None,
    fields: dict[str, Any] | None = None,
    now: dt.datetime | None = None,
) -> bool:
    """Move `rollout` from `source` to `target` and record `action`. False, writing nothing,
    when the row is no longer in `source` (someone else got there first)."""
    sources = _sources(source)
    for origin in sources:
        if not allowed(origin, target):
            raise IllegalTransition(f"a rollout cannot go from {origin} to {target}")
    now = now or timezone.now()
    updates: dict[str, Any] = {"status": target, "status_reason": reason[:4000], **(fields or {})}
    if target == R.RUNNING:
        updates.setdefault("progress_at", now)
    if target in FINAL_ROLLOUT_STATUSES:
        updates["finished_at"] = now
    with transaction.atomic():
        moved = Rollout.objects.filter(pk=rollout.pk, status__in=sources).update(**updates)
        if not moved:
            return False
        for name, value in updates.items():
            setattr(rollout, name, value)
        audit.record(
            action=action,
            actor=actor,
            target=rollout,
            correlation_id=rollout.correlation_id,
            data={"reason": reason, **(data or {})} if reason else data,
            hosts=rollout_host_ids(rollout),
        )
    return True


def rollout_host_transition(
    *,
    rollout_host: RolloutHost,
    source: str | Iterable[str],
    target: str,
    action: str | None = None,
    actor: Any = None,
    data: dict[str, Any] | None = None,
    fields: dict[str, Any] | None = None,
    now: dt.datetime | None = None,
) -> bool:
    """Move one host of a rollout from `source` to `target` (and record `action`, when given,
    against the rollout and the host). False, writing nothing, when the row moved already."""
    sources = _sources(source)
    for origin in sources:
        if not host_allowed(origin, target):
            raise IllegalTransition(f"a rollout's host cannot go from {origin} to {target}")
    now = now or timezone.now()
    updates: dict[str, Any] = {"status": target, **(fields or {})}
    if target in HOST_FINAL:
        updates["finished_at"] = now
    with transaction.atomic():
        moved = RolloutHost.objects.filter(pk=rollout_host.pk, status__in=sources).update(**updates)
        if not moved:
            return False
        for name, value in updates.items():
            setattr(rollout_host, name, value)
        if action is not None:
            rollout = rollout_host.rollout
            audit.record(
                action=action,
                actor=actor,
                target=rollout,
                host=rollout_host.host,
                correlation_id=rollout.correlation_id,
                data={"host": rollout_host.host.name, "wave": rollout_host.wave, **(data or {})},
            )
    return True


def rollout_hosts_not_reached(*, rollout: Rollout, now: dt.datetime | None = None) -> int:
    """A rollout that ended (rejected, aborted, halted, failed): the hosts still waiting for
    their turn will not get one. One UPDATE, in the caller's transaction with the rollout's."""
    return RolloutHost.objects.filter(rollout=rollout, status=H.PENDING).update(
        status=H.NOT_REACHED, claim_token="", finished_at=now or timezone.now()
    )


def rollout_record(
    *, rollout: Rollout, action: str, data: dict[str, Any], actor: Any = None
) -> None:
    """An event of the rollout that moves no status (a wave started or passed), in the
    caller's transaction."""
    audit.record(
        action=action,
        actor=actor,
        target=rollout,
        correlation_id=rollout.correlation_id,
        data=data,
        hosts=rollout_host_ids(rollout),
    )


def rollout_host_ids(rollout: Rollout) -> list[int]:
    """Every host the rollout names: its events concern them all, so the audit log shows them
    only to people who see each one (AuditEventHost)."""
    return list(RolloutHost.objects.filter(rollout=rollout).values_list("host_id", flat=True))
