"""Maintenance: a person says "I am working on this host, leave it alone" until an end time.

While a host is in maintenance (`Host.in_maintenance`), automation leaves it alone: rollouts
skip it and verdict webhooks (host.degraded, host.recovered, host.unreachable) are not sent,
though the verdict itself is still decided, stored and audited. Scheduled probes go on: the
picture stays true, and the first probe after the work shows what it left. Nothing a person
does is refused: a change requested on a host in maintenance runs like any other.

The state lives on the host's row, so it survives restarts of every process. Entering,
changing (entering again), leaving early and the end time passing are each one audit event,
written in the transaction that changes the row.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from controlplane.accounts.roles import OPERATOR
from controlplane.audit import reasons
from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction

from ..models import Host
from ..scope import user_has_role_on_host
from .permissions import HostRefused

# The longest one entry may last. Maintenance silences webhooks: one forgotten for months would
# hide a host's failures for months, so a longer job is entered again (which is audited) rather
# than set once and forgotten.
MAINTENANCE_MAX = dt.timedelta(days=30)
FIELDS = ["maintenance_reason", "maintenance_since", "maintenance_until", "maintenance_by"]


@dataclass(frozen=True)
class MaintenanceEntered:
    """What entering did: the host as it is now, whether it was in maintenance already (its
    reason and end time were changed), and the change job running on it, if one is (it is not
    stopped: maintenance concerns automation, and the job is a person's decision)."""

    host: Host
    changed: bool
    running_change: int | None


def user_may_maintain(user: Any, host: Host) -> bool:
    """An operator of the host (administrators hold every role) puts it in maintenance and
    takes it out."""
    return user_has_role_on_host(user, OPERATOR, host)


def require_maintain_permission(user: Any, host: Host) -> None:
    if not user_may_maintain(user, host):
        raise HostRefused(
            f"Putting {host.name} in maintenance or taking it out needs the operator role on it.",
            code="forbidden",
        )


def maintenance_state(host: Host) -> dict[str, Any]:
    """What the audit log records of a host's maintenance (also the API's shape)."""
    return {
        "reason": host.maintenance_reason,
        "since": host.maintenance_since.isoformat() if host.maintenance_since else None,
        "until": host.maintenance_until.isoformat() if host.maintenance_until else None,
        "by": host.maintenance_by,
    }


def running_change_id(host: Host, now: dt.datetime) -> int | None:
    """The change job holding the host's lease now, if one does. Read through the lease's
    reverse relation: the hosts layer may not import deployments, whose row it is, and the
    lease is the database's own record of who acts on a host right now."""
    held = (
        Host.objects.filter(pk=host.pk, lease__holder__isnull=False, lease__expires_at__gt=now)
        .values_list("lease__holder_id", flat=True)
        .first()
    )
    return int(held) if held is not None else None


def _until_checked(until: Any, now: dt.datetime) -> dt.datetime:
    if not isinstance(until, dt.datetime):
        raise HostRefused("Give the end time of the maintenance.", fields={"until": "required"})
    if timezone.is_naive(until):
        until = timezone.make_aware(until, dt.UTC)
    if until <= now:
        message = f"The end time {until:%Y-%m-%d %H:%M} UTC has passed: give one in the future."
        raise HostRefused(message, fields={"until": message})
    latest = now + MAINTENANCE_MAX
    if until > latest:
        message = (
            f"Maintenance lasts at most {MAINTENANCE_MAX.days} days (until "
            f"{latest:%Y-%m-%d %H:%M} UTC); enter it again before then to extend it."
        )
        raise HostRefused(message, fields={"until": message})
    return until


def host_maintenance_enter(
    *, host: Host, user: Any, reason: str, until: Any, now: dt.datetime | None = None
) -> MaintenanceEntered:
    """Put `host` in maintenance until `until`, or change the reason and end time of the
    maintenance it is in (extend it, or end it sooner). `since` stays when it began."""
    require_maintain_permission(user, host)
    now = now or timezone.now()
    try:
        reason = reasons.validate_reason(reason, what="maintenance")
    except ValidationError as exc:
        raise HostRefused(exc.messages[0], fields={"reason": exc.messages[0]}) from exc
    until = _until_checked(until, now)
    _expire(host.pk, now)  # an end already passed is recorded before anything new begins
    with transaction.atomic():
        locked = Host.objects.select_for_update().get(pk=host.pk)
        changed = locked.in_maintenance(now)
        before = maintenance_state(locked)
        if not changed:
            locked.maintenance_since = now
        locked.maintenance_reason = reason
        locked.maintenance_until = until
        locked.maintenance_by = user.get_username()
        locked.save(update_fields=FIELDS)
        running = running_change_id(locked, now)
        data: dict[str, Any] = {**maintenance_state(locked), "running_change": running}
        if changed:
            data = {"before": before, "after": maintenance_state(locked), "running_change": running}
        audit.record(
            action=(
                AuditAction.HOST_MAINTENANCE_CHANGED
                if changed
                else AuditAction.HOST_MAINTENANCE_ENTERED
            ),
            actor=user,
            target=locked,
            data=data,
        )
    return MaintenanceEntered(locked, changed, running)


def host_maintenance_leave(*, host: Host, user: Any, now: dt.datetime | None = None) -> Host:
    """Take `host` out of maintenance before its end time."""
    require_maintain_permission(user, host)
    now = now or timezone.now()
    _expire(host.pk, now)
    with transaction.atomic():
        locked = Host.objects.select_for_update().get(pk=host.pk)
        if not locked.in_maintenance(now):
            raise HostRefused(f"{host.name} is not in maintenance.", code="conflict")
        before = maintenance_state(locked)
        _clear(locked)
        audit.record(
            action=AuditAction.HOST_MAINTENANCE_LEFT,
            actor=user,
            target=locked,
            data={**before, "left_at": now.isoformat()},
        )
    return locked


def hosts_maintenance_expire(*, now: dt.datetime | None = None) -> list[int]:
    """End every maintenance whose end time has passed: one `host.maintenance_ended` event per
    host, by the system actor. Safe to run twice, and by two processes at once: each host is
    ended under its row lock, and only if its end time is still the one that passed."""
    now = now or timezone.now()
    due = Host.objects.filter(maintenance_until__lte=now).values_list("pk", flat=True)
    return [pk for pk in list(due) if _expire(pk, now)]


def _expire(host_id: int, now: dt.datetime) -> bool:
    """End the host's maintenance if its end time has passed; whether this call ended it."""
    with transaction.atomic():
        locked = Host.objects.select_for_update().filter(pk=host_id).first()
        if locked is None or locked.maintenance_until is None or locked.in_maintenance(now):
            return False
        before = maintenance_state(locked)
        _clear(locked)
        audit.record(
            action=AuditAction.HOST_MAINTENANCE_ENDED,
            actor=audit.SYSTEM_BEAT,
            target=locked,
            data={**before, "ended_at": now.isoformat()},
        )
    return True


def _clear(host: Host) -> None:
    host.maintenance_reason = ""
    host.maintenance_since = None
    host.maintenance_until = None
    host.maintenance_by = ""
    host.save(update_fields=FIELDS)
