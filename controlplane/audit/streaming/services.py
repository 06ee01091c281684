"""What beat and an administrator do to the stream: the sweep that keeps every destination
moving, and a replay from a seq (audited)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from controlplane.audit.chain import GENESIS_HASH
from controlplane.audit.models import AuditEvent, AuditStreamCursor
from controlplane.audit.reasons import validate_reason
from controlplane.refusals import Refused

from . import dispatch
from .delivery import configured, cursor_ensure, head_seq


class StreamRefused(Refused):
    """A stream operation that cannot be done as asked."""


def streams_sweep(*, now: dt.datetime | None = None) -> list[str]:
    """Beat's look at every destination: make the cursors of new ones (audited), note the ones
    gone from AUDIT_STREAMS (audited, once), and queue a send to each one that is behind and
    neither being sent nor backing off. Returns the names queued."""
    now = now or timezone.now()
    destinations = settings.AUDIT_STREAMS
    for destination in destinations:
        cursor_ensure(destination=destination)
    _note_removed({d.name for d in destinations}, now)
    head = head_seq()
    queued = []
    for cursor in AuditStreamCursor.objects.filter(
        name__in=[d.name for d in destinations], delivered_seq__lt=head
    ):
        leased = cursor.lease_until is not None and cursor.lease_until > now
        waiting = cursor.next_attempt_at is not None and cursor.next_attempt_at > now
        if not leased and not waiting and dispatch.send(cursor.name):
            queued.append(cursor.name)
    return queued


def _note_removed(names: set[str], now: dt.datetime) -> None:
    gone = AuditStreamCursor.objects.filter(removed_at__isnull=True).exclude(name__in=names)
    for cursor in gone:
        with transaction.atomic():
            audit.chain_lock()
            # Conditional: of two sweeps at once, one notes it.
            if not AuditStreamCursor.objects.filter(pk=cursor.pk, removed_at__isnull=True).update(
                removed_at=now
            ):
                continue
            audit.record(
                action=AuditAction.AUDIT_STREAM_REMOVED,
                actor=audit.SYSTEM_BEAT,
                target=cursor,
                data={
                    "destination": cursor.name,
                    "kind": cursor.kind,
                    "delivered_seq": cursor.delivered_seq,
                },
            )


def stream_replay(
    *, name: str, from_seq: int, actor: Any, reason: str, os_user: str = ""
) -> AuditStreamCursor:
    """Send destination `name` everything again from `from_seq` on, flagged as redeliveries
    (a receiver that lost data, a SIEM restored from backup). Only backwards: a replay never
    skips what was not delivered yet. Audited with the reason (and, from the command line, the
    machine's name for who ran it), in the same transaction."""
    destination = configured(name)
    if destination is None:
        raise StreamRefused(f"no audit stream named {name!r} in AUDIT_STREAMS", code="not_found")
    text = validate_reason(reason, what="a replay")
    cursor_ensure(destination=destination)
    with transaction.atomic():
        audit.chain_lock()
        cursor = AuditStreamCursor.objects.select_for_update().get(name=name)
        now = timezone.now()
        if cursor.lease_until is not None and cursor.lease_until > now:
            wait = (cursor.lease_until - now).total_seconds()
            raise StreamRefused(
                f"{name} is being sent to right now; try again in {wait:.0f} s", code="conflict"
            )
        if not 1 <= from_seq <= cursor.delivered_seq:
            raise StreamRefused(
                f"{name} has taken events up to #{cursor.delivered_seq}: a replay starts at "
                f"#1 to #{cursor.delivered_seq} (it never skips ahead)"
            )
        previous = GENESIS_HASH
        if from_seq > 1:
            found = AuditEvent.objects.filter(seq=from_seq - 1).values_list("hash", flat=True)
            if not found:
                raise StreamRefused(
                    f"event #{from_seq - 1} is missing, so #{from_seq} cannot be linked to it; "
                    "run verify_audit"
                )
            previous = found[0]
        before = cursor.delivered_seq
        AuditStreamCursor.objects.filter(pk=cursor.pk).update(
            delivered_seq=from_seq - 1,
            delivered_hash=previous,
            next_attempt_at=None,
        )
        audit.record(
            action=AuditAction.AUDIT_STREAM_REPLAYED,
            actor=actor,
            target=cursor,
            data={
                "destination": name,
                "kind": destination.kind,
                "where": destination.where(),
                "from_seq": from_seq,
                "previous_delivered_seq": before,
                "reason": text,
                **({"os_user": os_user} if os_user else {}),
            },
        )
        transaction.on_commit(lambda: dispatch.send(name))
    cursor.refresh_from_db()
    return cursor
