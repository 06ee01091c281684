"""Streaming the audit log to each destination, at least once, in order, from a cursor.

One send, for one destination:

1. Claim the destination's cursor row (SELECT ... FOR UPDATE SKIP LOCKED, then a lease with a
   fencing token), so two workers never send to one destination at once: the second one finds
   the row locked or leased and leaves.
2. Read the events after `delivered_seq`, in seq order, and check that they continue the
   chain: the first is `delivered_seq + 1` with `delivered_hash` as its prev_hash, each next
   one links to the one before. A gap or a broken link stops the stream there (and says so)
   rather than step over it: nothing is ever skipped.
3. Write `sent_seq` (committed) before sending: whatever is sent again up to it is flagged as a
   redelivery, so a crash between the send and step 5 resends with the flag, never silently.
4. Send the batch; the transport returns only once the receiver took it (transports.py).
5. Move the cursor to the batch's last event, fenced by the token: a worker whose lease ran out
   cannot move a cursor another worker now holds.

A failure keeps the cursor, counts the attempt, keeps the error in words and schedules the next
try after a backoff that doubles (5 s up to AUDIT_STREAM_RETRY_MAX_SECONDS).
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from controlplane.audit import context as audit_context
from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from controlplane.audit.chain import GENESIS_HASH, ROW_COLUMNS
from controlplane.audit.chain_walk import created_iso_sql
from controlplane.audit.models import AuditChainHead, AuditStreamCursor
from controlplane.settings_parts.audit_streams import START_HEAD, StreamDestination

from . import dispatch, records
from .choices import SendStatus
from .errors import Deadline, StreamSendError
from .transports import sender_for

logger = logging.getLogger(__name__)

FIRST_RETRY_SECONDS = 5.0
# How many batches one task sends before it hands over to a fresh task (others queue behind).
BATCHES_PER_TASK = 20
LEASE_MARGIN_SECONDS = 30


class BrokenChain(Exception):
    """The events after the cursor do not continue the chain it stands on."""


class LeaseLost(Exception):
    """The cursor is no longer this worker's (its lease ran out, or a replay moved it)."""


@dataclass(frozen=True)
class Claim:
    """A worker's hold on one cursor for one batch."""

    cursor_id: int
    token: str
    delivered_seq: int
    delivered_hash: str
    sent_seq: int


@dataclass
class DeliveryOutcome:
    """What one call to stream_deliver did (a task's return value, the command's report)."""

    destination: str
    status: SendStatus
    sent: int = 0
    redelivered: int = 0
    delivered_seq: int | None = None
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def configured(name: str) -> StreamDestination | None:
    return next((d for d in settings.AUDIT_STREAMS if d.name == name), None)


def lease_seconds(destination: StreamDestination) -> float:
    """A send may take twice the destination's timeout (Deadline); the lease outlasts it."""
    return destination.timeout * 2 + LEASE_MARGIN_SECONDS


def retry_delay(attempts: int) -> float:
    delay = FIRST_RETRY_SECONDS * 2 ** min(attempts - 1, 30)
    return float(min(settings.AUDIT_STREAM_RETRY_MAX_SECONDS, delay))


def head_seq() -> int:
    return AuditChainHead.objects.filter(pk=1).values_list("seq", flat=True).first() or 0


# --- reading the events after a cursor -----------------------------------------------------------


def _select_after_sql() -> str:
    columns = ", ".join(
        created_iso_sql(connection.vendor) if c == "created_at" else f'"{c}"' for c in ROW_COLUMNS
    )
    return f"SELECT {columns} FROM audit_auditevent WHERE seq > %s ORDER BY seq LIMIT %s"  # noqa: S608 (column names only)


def rows_after(seq: int, limit: int) -> list[tuple[Any, ...]]:
    """Events after `seq`, oldest first, in ROW_COLUMNS order as verification reads them."""
    with connection.cursor() as cursor:
        cursor.execute(_select_after_sql(), [seq, limit])
        return list(cursor.fetchall())


def continuing(rows: list[tuple[Any, ...]], *, seq: int, hash_: str) -> Iterator[tuple[Any, ...]]:
    """`rows`, checked to continue the chain from (seq, hash_); BrokenChain where they do not."""
    expected, prev = seq + 1, hash_
    for row in rows:
        if row[0] != expected:
            raise BrokenChain(
                f"event #{expected} is missing (the next stored is #{row[0]}): the stream waits "
                "there rather than skip it; run verify_audit"
            )
        if row[17] != prev:
            raise BrokenChain(
                f"event #{row[0]} does not link to #{expected - 1} (its prev_hash is not that "
                "event's hash): the stream waits there; run verify_audit"
            )
        yield row
        expected, prev = expected + 1, row[18]


# --- the cursor ---------------------------------------------------------------------------------


def cursor_ensure(*, destination: StreamDestination) -> AuditStreamCursor:
    """The destination's cursor, made (and audited) the first time it is seen, or when it comes
    back to AUDIT_STREAMS after it was removed (it resumes where it stopped)."""
    cursor = AuditStreamCursor.objects.filter(name=destination.name).first()
    if cursor is not None and cursor.removed_at is None:
        return cursor
    with transaction.atomic():
        # The chain head's lock first, as every writer that appends takes it: the start of a
        # new cursor at the head is then exactly the head, and two sweeps cannot both add it.
        audit.chain_lock()
        cursor = AuditStreamCursor.objects.select_for_update().filter(name=destination.name).first()
        if cursor is not None and cursor.removed_at is None:
            return cursor
        now = timezone.now()
        if cursor is None:
            seq, hash_ = 0, GENESIS_HASH
            if destination.start == START_HEAD:
                head = AuditChainHead.objects.get(pk=1)
                seq, hash_ = head.seq, head.hash
            cursor = AuditStreamCursor.objects.create(
                name=destination.name,
                kind=destination.kind,
                delivered_seq=seq,
                delivered_hash=hash_,
                sent_seq=seq,
                created_at=now,
            )
        else:
            cursor.removed_at = None
            cursor.kind = destination.kind
            cursor.save(update_fields=["removed_at", "kind"])
        audit.record(
            action=AuditAction.AUDIT_STREAM_ADDED,
            # beat's sweep, a worker's send or a command, as the caller's context says
            actor=audit_context.current().actor or audit.SYSTEM_WORKER,
            target=cursor,
            data={
                "destination": destination.name,
                "kind": destination.kind,
                "where": destination.where(),
                "from_seq": cursor.delivered_seq + 1,
            },
        )
    return cursor


def _claim(destination: StreamDestination, *, force: bool) -> Claim | SendStatus:
    """Hold the cursor for one batch, or say why not (BUSY, WAITING, NOT_CONFIGURED)."""
    now = timezone.now()
    with transaction.atomic():
        rows = AuditStreamCursor.objects.select_for_update(skip_locked=True).filter(
            name=destination.name, removed_at__isnull=True
        )
        cursor = rows.first()
        if cursor is None:
            # Locked by a worker that is claiming it right now, or not there at all.
            exists = AuditStreamCursor.objects.filter(
                name=destination.name, removed_at__isnull=True
            ).exists()
            return SendStatus.BUSY if exists else SendStatus.NOT_CONFIGURED
        if cursor.lease_until is not None and cursor.lease_until > now:
            return SendStatus.BUSY
        if not force and cursor.next_attempt_at is not None and cursor.next_attempt_at > now:
            return SendStatus.WAITING
        token = uuid.uuid4().hex
        cursor.lease_until = now + dt.timedelta(seconds=lease_seconds(destination))
        cursor.lease_token = token
        cursor.save(update_fields=["lease_until", "lease_token"])
    return Claim(cursor.pk, token, cursor.delivered_seq, cursor.delivered_hash, cursor.sent_seq)


def _held(claim: Claim) -> Any:
    return AuditStreamCursor.objects.filter(pk=claim.cursor_id, lease_token=claim.token)


def _release(claim: Claim) -> None:
    _held(claim).update(lease_until=None, lease_token="")


def _failed(claim: Claim, destination: StreamDestination, error: str) -> float:
    now = timezone.now()
    attempts = (
        AuditStreamCursor.objects.filter(pk=claim.cursor_id).values_list("attempts", flat=True)
    ).first() or 0
    delay = retry_delay(attempts + 1)
    _held(claim).update(
        attempts=attempts + 1,
        last_error=error[:2000],
        last_attempt_at=now,
        next_attempt_at=now + dt.timedelta(seconds=delay),
        lease_until=None,
        lease_token="",
    )
    logger.warning(
        "audit stream %s (%s): events after #%s not delivered, next try in %.0f s: %s",
        destination.name,
        destination.where(),
        claim.delivered_seq,
        delay,
        error,
    )
    return delay


def _advance(claim: Claim, batch: list[dict[str, Any]], redelivered: int) -> bool:
    now = timezone.now()
    return bool(
        _held(claim)
        .filter(delivered_seq=claim.delivered_seq)
        .update(
            delivered_seq=batch[-1]["seq"],
            delivered_hash=batch[-1]["hash"],
            attempts=0,
            last_error="",
            last_attempt_at=now,
            last_success_at=now,
            next_attempt_at=None,
            redelivered=F("redelivered") + redelivered,
            lease_until=None,
            lease_token="",
        )
    )


# --- sending ------------------------------------------------------------------------------------


def batch_prepare(claim: Claim, destination: StreamDestination) -> list[dict[str, Any]]:
    """The next batch as records, each flagged if it may have been sent before, with sent_seq
    moved past it (committed) before anything is sent. Empty when the stream is caught up."""
    rows = rows_after(claim.delivered_seq, destination.batch_size)
    checked: list[tuple[Any, ...]] = []
    try:
        for row in continuing(rows, seq=claim.delivered_seq, hash_=claim.delivered_hash):
            checked.append(row)
    except BrokenChain:
        if not checked:
            raise  # the break is next: the stream stops here
        # Send what comes before the break; the next batch starts at it, and stops.
    batch = [records.record_from_row(r, redelivery=r[0] <= claim.sent_seq) for r in checked]
    if batch and not _held(claim).update(sent_seq=Greatest("sent_seq", batch[-1]["seq"])):
        raise LeaseLost
    return batch


def _send_one(destination: StreamDestination, claim: Claim, outcome: DeliveryOutcome) -> bool:
    """Send one batch under `claim`; True if the stream may go on with the next."""
    try:
        batch = batch_prepare(claim, destination)
    except BrokenChain as exc:
        _failed(claim, destination, str(exc))
        outcome.status, outcome.error = SendStatus.HALTED, str(exc)
        return False
    except LeaseLost:
        outcome.status = SendStatus.BUSY
        return False
    if not batch:
        _release(claim)
        outcome.status = SendStatus.CAUGHT_UP
        return False
    try:
        sender_for(destination.kind)(destination, batch, Deadline(destination.timeout * 2))
    except StreamSendError as exc:
        delay = _failed(claim, destination, exc.message)
        dispatch.send(destination.name, countdown=delay)
        outcome.status, outcome.error = SendStatus.FAILED, exc.message
        return False
    redelivered = sum(1 for r in batch if r["redelivery"])
    if not _advance(claim, batch, redelivered):
        # The lease ran out and another worker (or a replay) moved on: this batch will be sent
        # again, flagged, by whoever holds the cursor now.
        logger.warning(
            "audit stream %s: lost the cursor while sending #%s..#%s; they go again, flagged",
            destination.name,
            batch[0]["seq"],
            batch[-1]["seq"],
        )
        outcome.status = SendStatus.BUSY
        return False
    outcome.sent += len(batch)
    outcome.redelivered += redelivered
    outcome.delivered_seq = batch[-1]["seq"]
    return True


def stream_deliver(
    *, destination: StreamDestination, force: bool = False, max_batches: int = BATCHES_PER_TASK
) -> DeliveryOutcome:
    """Send what the destination has not taken yet, batch by batch, until it is caught up, a
    send fails, or `max_batches` went (then a fresh task carries on). Safe to run twice and
    from any number of workers at once. `force` ignores the backoff after a failure."""
    cursor_ensure(destination=destination)
    outcome = DeliveryOutcome(destination=destination.name, status=SendStatus.CAUGHT_UP)
    for _ in range(max_batches):
        claim = _claim(destination, force=force)
        if isinstance(claim, SendStatus):
            outcome.status = claim
            return outcome
        if not _send_one(destination, claim, outcome):
            if outcome.status != SendStatus.CAUGHT_UP:
                return outcome
            # An append that committed while this worker held the cursor had its kick turned
            # away as "busy": look once more now that the cursor is free.
            if head_seq() <= claim.delivered_seq:
                return outcome
    outcome.status = SendStatus.MORE
    dispatch.send(destination.name)
    return outcome


def stream_deliver_named(*, name: str) -> DeliveryOutcome:
    destination = configured(name)
    if destination is None:
        return DeliveryOutcome(destination=name, status=SendStatus.NOT_CONFIGURED)
    return stream_deliver(destination=destination)
