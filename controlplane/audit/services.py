"""Writing to the audit log. `record` is the one way in, used by every app."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db import models, transaction
from django.utils import timezone

from controlplane.redaction import redact_text

from . import checkpoints, context, signals
from .chain import GENESIS_HASH, event_hash, normalize_ip
from .models import AuditChainHead, AuditEvent, AuditEventHost, AuditVerification
from .streaming import dispatch as stream_dispatch
from .verification import VerificationResult, chain_verify

logger = logging.getLogger(__name__)

SYSTEM_WORKER = "system:worker"
SYSTEM_BEAT = "system:beat"
SYSTEM_CLI = "system:cli"

REDACTED = "[redacted]"
_SECRET_KEY_PATTERN = re.compile(
    r"(secret|password|passwd|private|token|api[_-]?key|encrypted|fernet|credential_material)", re.I
)


def redact(value: Any) -> Any:
    """Replace the value of every secret-looking key, at any depth, and whatever looks secret
    inside every string (a journal line, a unit file, an error quoting host output) as
    controlplane.redaction does for all host text."""
    if isinstance(value, dict):
        return {
            str(k): (REDACTED if _SECRET_KEY_PATTERN.search(str(k)) else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def _jsonable(value: Any) -> Any:
    # Round-trip so the hashed form is exactly what the JSON column will give back.
    return json.loads(json.dumps(value, default=str))


def _actor_fields(actor: Any) -> tuple[str, int | None, dict[str, str] | None]:
    """The actor's name, user id, and who they are at the identity provider (or None)."""
    if actor is None:
        actor = context.current().actor
    if actor is None:
        return "system:unknown", None, None
    if isinstance(actor, str):
        return actor[:200], None, None
    if getattr(actor, "is_authenticated", False):
        return actor.get_username()[:200], actor.pk, _provider_identity(actor)
    return "anonymous", None, None


def _provider_identity(user: Any) -> dict[str, str] | None:
    """The issuer and subject of a user who signs in at the team's identity provider: a user
    name is ours to give, these say who the provider vouched for. None for a local account.
    Django keeps the answer on the user object, absent included, so it is asked once."""
    try:
        identity = user.identity
    except (ObjectDoesNotExist, AttributeError):
        return None
    return {"issuer": identity.issuer, "subject": identity.subject}


def _target_fields(target: Any) -> tuple[str, str, str]:
    if target is None:
        return "", "", ""
    if isinstance(target, models.Model):
        return target._meta.label_lower, str(target.pk or ""), str(target)[:300]
    if isinstance(target, tuple):  # (type, id, label) for things that are not rows
        kind, ident, label = target
        return str(kind), str(ident), str(label)[:300]
    return type(target).__name__, "", str(target)[:300]


def _host_fields(host: Any, target: Any) -> tuple[int | None, str]:
    if host is None and target is not None:
        host = getattr(target, "host", None) if not _is_host(target) else target
    if host is None:
        return None, ""
    return host.pk, host.name


def _is_host(obj: Any) -> bool:
    return isinstance(obj, models.Model) and obj._meta.label_lower == "hosts.host"


def _event_fields(
    *,
    action: str,
    actor: Any = None,
    target: Any = None,
    host: Any = None,
    snapshot: Any = None,
    data: dict[str, Any] | None = None,
    request: Any = None,
    correlation_id: str | None = None,
) -> tuple[dict[str, Any], Any]:
    """Everything about an event except its place in the chain (seq, time, hashes)."""
    ctx = context.current()
    actor_name, actor_id, actor_identity = _actor_fields(actor)
    target_type, target_id, target_label = _target_fields(target)
    host_id, host_label = _host_fields(host, target)
    ip = ctx.ip
    agent = ctx.user_agent
    if request is not None:
        ip = request.META.get("REMOTE_ADDR") or ip
        agent = request.META.get("HTTP_USER_AGENT", agent)
    payload = _jsonable(redact(data or {}))
    if actor_identity is not None:
        # After redaction: a subject is an opaque identifier that may look like a secret.
        payload["actor_identity"] = actor_identity
    fields: dict[str, Any] = {
        "actor": actor_name,
        "actor_user_id": actor_id,
        "action": action,
        "target_type": target_type,
        "target_id": target_id,
        "target_label": _text(target_label, 300),
        "host_id": host_id,
        "host_label": _text(host_label, 200),
        "snapshot_id": getattr(snapshot, "pk", None),
        "snapshot_digest": getattr(snapshot, "digest", "") or "",
        "correlation_id": correlation_id or ctx.correlation_id or "",
        "data": payload,
        "ip": normalize_ip(ip),
        "user_agent": _text(agent or "", 300),
    }
    return fields, snapshot


def chain_lock() -> None:
    """Take the chain head's lock now, in the caller's transaction (held until it ends).

    One order for every writer, so two of them cannot deadlock: the hosts' rows it changes
    (by id: hosts.services.hosts_rows_lock), then this, then any other row it locks
    (verdicts, identities, stream cursors)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("chain_lock() outside a transaction would hold nothing")
    AuditChainHead.objects.select_for_update().get_or_create(pk=1)


def _append(pending: list[tuple[dict[str, Any], Any]]) -> list[AuditEvent]:
    """Chain and insert events under the head lock, in the caller's transaction."""
    events = []
    with transaction.atomic():
        head, _ = AuditChainHead.objects.select_for_update().get_or_create(pk=1)
        # The clock is read under the lock, so time never runs backwards along the chain
        # (on one clock) and the snapshot's age is measured at the moment of writing.
        now = timezone.now()
        seq, prev = head.seq, head.hash or GENESIS_HASH
        for fields, snapshot in pending:
            fields["created_at"] = now
            fields["snapshot_age_seconds"] = (
                round(snapshot.age_seconds(now=now), 3) if snapshot is not None else None
            )
            seq += 1
            fields["seq"] = seq
            fields["prev_hash"] = prev
            fields["hash"] = prev = event_hash(fields)
            events.append(AuditEvent(**fields))
        if len(events) == 1:
            events[0].save()
        else:
            AuditEvent.objects.bulk_create(events)
        head.seq, head.hash = seq, prev
        head.save(update_fields=["seq", "hash"])
    # Listeners (notifications) hear of events only once they are committed, never for a
    # change that rolled back.
    for event in events:
        # send_robust + robust: a failing listener must never fail the action it heard about.
        transaction.on_commit(
            partial(signals.event_committed.send_robust, sender=AuditEvent, event=event),
            robust=True,
        )
    # The SIEM stream sends from its cursor; the kick only saves waiting for beat's sweep.
    stream_dispatch.kick_on_commit()
    return events


def record(
    *,
    action: str,
    actor: Any = None,
    target: Any = None,
    host: Any = None,
    snapshot: Any = None,
    data: dict[str, Any] | None = None,
    request: Any = None,
    correlation_id: str | None = None,
    hosts: Iterable[int] = (),
) -> AuditEvent:
    """Append one event inside the caller's transaction (or a new one).

    If the caller's transaction rolls back, the event goes with it; if it commits, so does the
    event. The chain head row is locked until then, which serialises writers. `hosts` are the
    ids of further hosts the event concerns (a rollout's), for the log's scope.
    """
    return record_many(
        [
            {
                "action": action,
                "actor": actor,
                "target": target,
                "host": host,
                "snapshot": snapshot,
                "data": data,
                "request": request,
                "correlation_id": correlation_id,
                "hosts": hosts,
            }
        ]
    )[0]


def record_many(entries: list[dict[str, Any]]) -> list[AuditEvent]:
    """Append several events (each given as `record`'s keyword arguments) with one lock and one
    insert: for a probe round, whose hundreds of events would otherwise queue on the lock."""
    if not entries:
        return []
    named = [sorted(set(entry.pop("hosts", None) or ())) for entry in entries]
    with transaction.atomic():
        events = _append([_event_fields(**entry) for entry in entries])
        AuditEventHost.objects.bulk_create(
            AuditEventHost(seq=event.seq, host_id=host_id)
            for event, host_ids in zip(events, named, strict=True)
            for host_id in host_ids
        )
    return events


def _text(value: str, limit: int) -> str:
    # PostgreSQL text cannot hold NUL; a header or label carrying one must not fail the change.
    return str(value).replace("\x00", "")[:limit]


# --- anchoring and verification ------------------------------------------------------------


def checkpoint_write(
    *, now: datetime | None = None, path: Path | None = None
) -> checkpoints.Checkpoint | None:
    """Sign the current chain head into the checkpoint file; None if nothing was appended
    since the last checkpoint (or the log is empty)."""
    head = AuditChainHead.objects.filter(pk=1).values_list("seq", "hash").first()
    if head is None or head[0] == 0:
        return None
    written = checkpoints.append(
        seq=head[0], head_hash=head[1], now=now or timezone.now(), path=path
    )
    if written is not None:
        logger.info("audit checkpoint #%s %s", written.seq, written.hash)
    return written


def verification_run(
    *, trigger: str, checkpoint_path: Path | None = None, workers: int | None = None
) -> VerificationResult:
    """Verify the whole log and keep the outcome for the history page.

    `workers=None` lets a large log on PostgreSQL be walked by several processes at once.
    """
    started_at = timezone.now()
    result = chain_verify(checkpoint_path=checkpoint_path, workers=workers)
    AuditVerification.objects.create(
        started_at=started_at,
        duration_ms=round(result.duration_seconds * 1000),
        trigger=trigger,
        ok=result.ok,
        events=result.events,
        head_seq=result.head_seq,
        head_hash=result.head_hash,
        checkpoints=result.checkpoints,
        broken_seq=result.broken_seq,
        problem=result.problem,
        reason=result.reason,
    )
    if result.ok:
        logger.info("audit log verified: %s", result.summary())
    else:
        logger.error("audit log verification failed: %s", result.summary())
    return result
