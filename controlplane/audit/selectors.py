"""Reading the audit log: filtered history with keyset pagination, one event and its story, a
host's timeline, exports, and the latest verification and checkpoint.

Nothing here counts rows: at a million events COUNT(*) alone would blow the page budget, so
pages are "the next N by seq" and the UI offers older/newer instead of page numbers.

Every read for a person takes the `user` it is for: an event naming a host outside their scope
(controlplane.accounts.roles) is left out everywhere, as if it did not exist; an event about no
host (a sign-in, a webhook's change) stays, as before host groups.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlencode

from django.db import connections
from django.db.models import Exists, ExpressionWrapper, OuterRef, Q, QuerySet, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast
from django.utils import timezone

from controlplane.accounts.models import HostGroup
from controlplane.accounts.roles import user_scope

from . import checkpoints, verification
from .chain import ROW_COLUMNS, canonical_json
from .chain_walk import created_iso_sql
from .models import AuditEvent, AuditEventHost, AuditVerification

PAGE_SIZE = 50
STORY_LIMIT = 200
# Events are stamped under the chain lock, so created_at follows seq up to the clock skew
# between the machines that write. Time filters are turned into a seq window this much wider,
# which is exact while that skew stays below it.
CLOCK_SKEW_MARGIN = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class EventFilter:
    """What the history page, its export and its links filter on. Empty fields match all."""

    actor: str = ""
    action: str = ""  # exact, or a prefix when it ends with "." or "*" (e.g. "change.")
    host: str = ""  # a host name (or its id)
    target: str = ""  # "type:id" (e.g. "hosts.host:3"), or part of the target's label
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    text: str = ""  # free text over actor, action, labels, correlation id and data
    correlation: str = ""

    def params(self) -> dict[str, str]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value in ("", None):
                continue
            out[f.name] = (
                value.strftime("%Y-%m-%dT%H:%M") if f.name in ("since", "until") else value
            )
        return out

    def querystring(self) -> str:
        return urlencode(self.params())

    def is_empty(self) -> bool:
        return not self.params()


def _host_q(value: str) -> Q:
    """A host's id, or the name each event recorded (so a deleted host's events are found
    too, and the audit log needs nothing from the hosts app)."""
    if value.isascii() and value.isdigit():  # "²".isdigit() is true, int("²") is not
        return Q(host_id=int(value))
    return Q(host_label=value)


def _shifted(moment: dt.datetime, by: dt.timedelta) -> dt.datetime:
    """`moment + by`, held inside the calendar at its ends (year 1 and 9999)."""
    try:
        return moment + by
    except OverflowError:
        return (
            dt.datetime.min.replace(tzinfo=dt.UTC)
            if by < dt.timedelta(0)
            else dt.datetime.max.replace(tzinfo=dt.UTC)
        )


def _target_q(value: str) -> Q:
    kind, sep, ident = value.rpartition(":")
    if sep and "." in kind and ident:
        return Q(target_type=kind, target_id=ident)
    return Q(target_label__icontains=value)


def events_in_scope(events: QuerySet[AuditEvent], *, user: Any) -> QuerySet[AuditEvent]:
    """`events` without those about a host `user` does not see: its own host, or any of the
    further hosts it names (AuditEventHost: a rollout's). Events about no host stay."""
    return events.filter(event_scope_q(user=user, seq_field="seq"))


def event_scope_q(*, user: Any, seq_field: str, host_field: str = "host_id") -> Q:
    """The filter events_in_scope applies, for any rows that copy an event's host and seq
    (webhook deliveries too)."""
    scope = user_scope(user)
    seen = scope.host_q(host_field)
    if not seen:  # every host
        return seen
    unseen = AuditEventHost.objects.filter(seq=OuterRef(seq_field)).exclude(scope.host_q("host_id"))
    return Q(seen | Q(**{f"{host_field}__isnull": True}), ~Exists(unseen))


def host_in_scope(*, host_id: int, user: Any) -> bool:
    """Whether `user` sees the host with this id (the audit log knows hosts by id only)."""
    hosts_seen = user_scope(user).host_q("host_id")
    if not hosts_seen:
        return True
    return HostGroup.hosts.through.objects.filter(hosts_seen, host_id=host_id).exists()


def events_filtered(*, filters: EventFilter, user: Any) -> QuerySet[AuditEvent]:
    qs = events_in_scope(AuditEvent.objects.all(), user=user)
    if filters.actor:
        qs = qs.filter(actor=filters.actor)
    if filters.action:
        if filters.action.endswith(("*", ".")):
            qs = qs.filter(action__startswith=filters.action.rstrip("*"))
        else:
            qs = qs.filter(action=filters.action)
    if filters.host:
        qs = qs.filter(_host_q(filters.host))
    if filters.target:
        qs = qs.filter(_target_q(filters.target))
    if filters.since:
        qs = qs.filter(created_at__gte=filters.since)
        # The newest event stamped well before `since` bounds the seq range from below, so the
        # query walks the seq index over the window instead of every newer event.
        floor = (
            AuditEvent.objects.filter(created_at__lt=_shifted(filters.since, -CLOCK_SKEW_MARGIN))
            .order_by("-created_at")
            .values_list("seq", flat=True)
            .first()
        )
        if floor is not None:
            qs = qs.filter(seq__gt=floor)
    if filters.until:
        qs = qs.filter(created_at__lt=filters.until)
        ceiling = (
            AuditEvent.objects.filter(created_at__gte=_shifted(filters.until, CLOCK_SKEW_MARGIN))
            .order_by("created_at")
            .values_list("seq", flat=True)
            .first()
        )
        if ceiling is not None:
            qs = qs.filter(seq__lt=ceiling)
    if filters.correlation:
        qs = qs.filter(correlation_id=filters.correlation)
    if filters.text:
        t = filters.text
        qs = qs.filter(
            Q(actor__icontains=t)
            | Q(action__icontains=t)
            | Q(target_label__icontains=t)
            | Q(host_label__icontains=t)
            | Q(correlation_id=t)
            | Q(data__icontains=t)
        )
    return qs


@dataclass(frozen=True)
class EventPage:
    events: list[AuditEvent]
    older: int | None  # pass as ?before= to get the next older page
    newer: int | None  # pass as ?after= to get the next newer page


def events_page(
    *,
    filters: EventFilter,
    user: Any,
    before: int | None = None,
    after: int | None = None,
    size: int = PAGE_SIZE,
) -> EventPage:
    """One page of matching events, newest first, by keyset on seq: each page is an index range
    scan however deep it is. Fetches one extra row to know whether there is more."""
    qs = events_filtered(filters=filters, user=user).defer("user_agent", "prev_hash", "hash")
    if after is not None:
        rows = list(qs.filter(seq__gt=after).order_by("seq")[: size + 1])
        more_newer = len(rows) > size
        events = list(reversed(rows[:size]))
        return EventPage(
            events=events,
            older=events[-1].seq if events else None,
            newer=events[0].seq if events and more_newer else None,
        )
    if before is not None:
        qs = qs.filter(seq__lt=before)
    rows = list(qs.order_by("-seq")[: size + 1])
    events = rows[:size]
    return EventPage(
        events=events,
        older=events[-1].seq if len(rows) > size else None,
        newer=events[0].seq if before is not None and events else None,
    )


def event_get(*, seq: int, user: Any) -> AuditEvent | None:
    return events_in_scope(AuditEvent.objects.filter(seq=seq), user=user).first()


def event_story(*, event: AuditEvent, user: Any, limit: int = STORY_LIMIT) -> list[AuditEvent]:
    """Every event of the same request, command or change (same correlation id) that `user`
    may see, in order."""
    if not event.correlation_id:
        return [event]
    return list(
        events_in_scope(AuditEvent.objects.all(), user=user)
        .filter(correlation_id=event.correlation_id)
        .defer("data", "user_agent", "prev_hash", "hash")
        .order_by("seq")[:limit]
    )


@dataclass(frozen=True)
class DiffRow:
    field: str
    before: str
    after: str
    change: str  # "added", "removed", "changed" or "same"


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else canonical_json(value)


def event_diff(*, event: AuditEvent) -> list[DiffRow]:
    """data.before against data.after, field by field; empty when the event has neither."""
    data = event.data if isinstance(event.data, dict) else {}
    before, after = data.get("before"), data.get("after")
    if not isinstance(before, dict) and not isinstance(after, dict):
        return []
    before = before if isinstance(before, dict) else {}
    after = after if isinstance(after, dict) else {}
    rows = []
    for key in sorted(set(before) | set(after)):
        if key not in before:
            rows.append(DiffRow(key, "", _shown(after[key]), "added"))
        elif key not in after:
            rows.append(DiffRow(key, _shown(before[key]), "", "removed"))
        else:
            change = "same" if before[key] == after[key] else "changed"
            rows.append(DiffRow(key, _shown(before[key]), _shown(after[key]), change))
    return rows


def event_data_rest(*, event: AuditEvent) -> str:
    """The event's data other than before/after, pretty-printed; empty when there is none."""
    data = event.data if isinstance(event.data, dict) else {"data": event.data}
    rest = {k: v for k, v in data.items() if k not in ("before", "after")}
    return json.dumps(rest, indent=2, sort_keys=True, ensure_ascii=False) if rest else ""


def events_of_correlation(correlation_id: str) -> QuerySet[AuditEvent] | list[AuditEvent]:
    """Every event of one request, job or probe (its correlation id), in order."""
    if not correlation_id:
        return []
    return AuditEvent.objects.filter(correlation_id=correlation_id).order_by("seq")


def host_timeline(host_id: int, limit: int = 20) -> list[AuditEvent]:
    """The newest events about one host (index audit_host_seq), for the host page."""
    return list(
        AuditEvent.objects.filter(host_id=host_id)
        .defer("user_agent", "prev_hash", "hash")
        .order_by("-seq")[:limit]
    )


def verification_latest() -> AuditVerification | None:
    return AuditVerification.objects.order_by("-started_at", "-id").first()


@dataclass(frozen=True)
class VerificationShown:
    """A verification as the history page's header shows it: the newest stored one (beat's,
    the command's), or one walked just now for the page, which is not stored (as the API's
    read-only verify: a person who asks changes nothing, and an observation about the log is
    no event in it). `behind`: events recorded after the head it verified."""

    ok: bool
    events: int
    head_seq: int
    head_hash: str
    checkpoints: int
    broken_seq: int | None
    problem: str
    reason: str
    started_at: dt.datetime
    duration_ms: int
    trigger: str
    behind: int
    stored: bool


def verification_shown(*, now: bool = False) -> VerificationShown | None:
    """The stored verification, or (`now`) a walk of the whole chain in this process."""
    if now:
        started = timezone.now()
        result = verification.chain_verify(workers=1)
        shown: dict[str, Any] = {
            "ok": result.ok, "events": result.events, "head_seq": result.head_seq,
            "head_hash": result.head_hash, "checkpoints": result.checkpoints,
            "broken_seq": result.broken_seq, "problem": result.problem, "reason": result.reason,
            "started_at": started, "duration_ms": round(result.duration_seconds * 1000),
            "trigger": "just now, for this page", "stored": False,
        }  # fmt: skip
    else:
        row = verification_latest()
        if row is None:
            return None
        shown = {f.name: getattr(row, f.name) for f in fields(VerificationShown)
                 if f.name not in ("behind", "stored")}  # fmt: skip
        shown["stored"] = True
    head = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
    return VerificationShown(**shown, behind=max(0, head - shown["head_seq"]))


def checkpoint_latest() -> checkpoints.Checkpoint | None:
    """The newest checkpoint line, read from the end of the file; None if there is none or the
    file cannot be read (verification reports why)."""
    try:
        return checkpoints.last()
    except (OSError, checkpoints.CheckpointProblem):
        return None


# --- export --------------------------------------------------------------------------------


def events_export_rows(
    *, filters: EventFilter, user: Any, batch_size: int = 5000
) -> Iterator[tuple[Any, ...]]:
    """Matching events oldest first, as rows in ROW_COLUMNS order (created_at as ISO text, data
    as its stored JSON text), fetched in keyset batches so memory stays flat."""
    names = [
        "created_iso" if c == "created_at" else "data_text" if c == "data" else c
        for c in ROW_COLUMNS
    ]
    # created_at as the ISO text the hash covers, formatted by the database (much cheaper than
    # building timezone-aware datetimes only to format them again).
    vendor = connections[AuditEvent.objects.db].vendor
    column = '"audit_auditevent"."created_at"'
    created_iso = RawSQL(created_iso_sql(vendor, column), ())  # noqa: S611 (constant SQL)
    qs = (
        events_filtered(filters=filters, user=user)
        .annotate(
            created_iso=ExpressionWrapper(created_iso, output_field=TextField()),
            data_text=Cast("data", TextField()),
        )
        .order_by("seq")
        .values_list(*names)
    )
    last = 0
    while True:
        batch = list(qs.filter(seq__gt=last)[:batch_size])
        if not batch:
            return
        yield from batch
        last = batch[-1][0]
