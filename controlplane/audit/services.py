"""Writing to the audit log. `record` is the one way in, used by every app."""

from __future__ import annotations

import json
import re
from typing import Any

from django.db import models, transaction
from django.utils import timezone

from . import context
from .chain import GENESIS_HASH, event_hash
from .models import AuditChainHead, AuditEvent

SYSTEM_WORKER = "system:worker"
SYSTEM_BEAT = "system:beat"
SYSTEM_CLI = "system:cli"

REDACTED = "[redacted]"
_SECRET_KEY_PATTERN = re.compile(
    r"(secret|password|passwd|private|token|api[_-]?key|encrypted|fernet|credential_material)", re.I
)


def redact(value: Any) -> Any:
    """Replace the value of every secret-looking key, at any depth."""
    if isinstance(value, dict):
        return {
            str(k): (REDACTED if _SECRET_KEY_PATTERN.search(str(k)) else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    # Round-trip so the hashed form is exactly what the JSON column will give back.
    return json.loads(json.dumps(value, default=str))


def _actor_fields(actor: Any) -> tuple[str, int | None]:
    if actor is None:
        actor = context.current().actor
    if actor is None:
        return "system:unknown", None
    if isinstance(actor, str):
        return actor[:200], None
    if getattr(actor, "is_authenticated", False):
        return actor.get_username()[:200], actor.pk
    return "anonymous", None


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
) -> AuditEvent:
    """Append one event inside the caller's transaction (or a new one).

    If the caller's transaction rolls back, the event goes with it; if it commits, so does the
    event. The chain head row is locked until then, which serialises writers.
    """
    ctx = context.current()
    actor_name, actor_id = _actor_fields(actor)
    target_type, target_id, target_label = _target_fields(target)
    host_id, host_label = _host_fields(host, target)
    ip = ctx.ip
    agent = ctx.user_agent
    if request is not None:
        ip = request.META.get("REMOTE_ADDR") or ip
        agent = request.META.get("HTTP_USER_AGENT", agent)[:300]
    now = timezone.now()
    fields: dict[str, Any] = {
        "created_at": now,
        "actor": actor_name,
        "actor_user_id": actor_id,
        "action": action,
        "target_type": target_type,
        "target_id": target_id,
        "target_label": target_label,
        "host_id": host_id,
        "host_label": host_label,
        "snapshot_id": getattr(snapshot, "pk", None),
        "snapshot_digest": getattr(snapshot, "digest", "") or "",
        "snapshot_age_seconds": (
            round(snapshot.age_seconds(now=now), 3) if snapshot is not None else None
        ),
        "correlation_id": correlation_id or ctx.correlation_id or "",
        "data": _jsonable(redact(data or {})),
        "ip": ip,
        "user_agent": agent or "",
    }
    with transaction.atomic():
        head, _ = AuditChainHead.objects.select_for_update().get_or_create(pk=1)
        fields["seq"] = head.seq + 1
        fields["prev_hash"] = head.hash or GENESIS_HASH
        fields["hash"] = event_hash(fields)
        event = AuditEvent(**fields)
        event.save()
        head.seq, head.hash = event.seq, event.hash
        head.save(update_fields=["seq", "hash"])
    return event
