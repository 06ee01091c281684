"""How far each destination of the audit stream has got: for the audit page, /metrics and
`manage.py audit_stream status`."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from controlplane.audit.models import AuditChainHead, AuditEvent, AuditStreamCursor


@dataclass(frozen=True)
class StreamStatus:
    """One destination as pages and metrics show it (never its keys or tokens)."""

    name: str
    kind: str
    where: str  # "" when it is no longer configured
    configured: bool
    delivered_seq: int
    head_seq: int
    lag_events: int
    lag_seconds: float  # age of the oldest event not yet taken; 0 when caught up
    attempts: int
    last_error: str
    last_success_at: dt.datetime | None
    next_attempt_at: dt.datetime | None
    sending: bool
    redelivered: int

    @property
    def failing(self) -> bool:
        return bool(self.last_error)

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        for key in ("last_success_at", "next_attempt_at"):
            out[key] = out[key].isoformat() if out[key] else None
        return out


def stream_statuses(*, now: dt.datetime | None = None) -> list[StreamStatus]:
    """Every configured destination (with or without a cursor yet) and every cursor of one that
    was removed from AUDIT_STREAMS, by name."""
    now = now or timezone.now()
    head = AuditChainHead.objects.filter(pk=1).values_list("seq", flat=True).first() or 0
    cursors = {c.name: c for c in AuditStreamCursor.objects.all()}
    destinations = {d.name: d for d in settings.AUDIT_STREAMS}
    out = []
    for name in sorted(set(cursors) | set(destinations)):
        cursor, destination = cursors.get(name), destinations.get(name)
        delivered = cursor.delivered_seq if cursor else 0
        lag_seconds = 0.0
        if delivered < head:
            oldest = (
                AuditEvent.objects.filter(seq=delivered + 1)
                .values_list("created_at", flat=True)
                .first()
            )
            lag_seconds = max(0.0, (now - oldest).total_seconds()) if oldest else 0.0
        out.append(
            StreamStatus(
                name=name,
                kind=destination.kind if destination else (cursor.kind if cursor else ""),
                where=destination.where() if destination else "",
                configured=destination is not None,
                delivered_seq=delivered,
                head_seq=head,
                lag_events=max(0, head - delivered),
                lag_seconds=lag_seconds,
                attempts=cursor.attempts if cursor else 0,
                last_error=cursor.last_error if cursor else "",
                last_success_at=cursor.last_success_at if cursor else None,
                next_attempt_at=cursor.next_attempt_at if cursor else None,
                sending=bool(cursor and cursor.lease_until and cursor.lease_until > now),
                redelivered=cursor.redelivered if cursor else 0,
            )
        )
    return out
