"""What the stream hands to its Celery tasks, by task name (the services never import the tasks,
which import them), and the kick an append gives it once its transaction commits."""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction

logger = logging.getLogger(__name__)

STREAM = "controlplane.audit.tasks.stream_destination"
SWEEP = "controlplane.audit.tasks.stream_sweep"


def send(name: str, *, countdown: float | None = None) -> bool:
    """Queue a send to destination `name`. A broker that is down is logged, not raised: beat's
    sweep finds the destination behind and queues it again."""
    options: dict[str, Any] = {"args": (name,)}
    if settings.AUDIT_STREAM_QUEUE:
        options["queue"] = settings.AUDIT_STREAM_QUEUE
    if countdown:
        options["countdown"] = countdown
    try:
        current_app.send_task(STREAM, **options)
    except Exception as exc:  # kombu's OperationalError, or whatever else the broker says
        logger.warning("audit stream %s not queued (%s); the sweep will", name, exc)
        return False
    return True


def kick() -> None:
    """Queue a send to every destination (after an append committed)."""
    for destination in settings.AUDIT_STREAMS:
        send(destination.name)


def kick_on_commit() -> None:
    """Kick the stream once the caller's transaction commits, once per transaction however many
    appends it makes (a change request writes several events; each would be a broker message)."""
    if not settings.AUDIT_STREAMS:
        return
    connection = transaction.get_connection()
    # Django keeps the pending callbacks as (savepoint ids, callable, robust); an entry of ours
    # already there will run. If that shape ever changes, this only kicks more than once.
    pending = getattr(connection, "run_on_commit", None) or []
    if any(len(entry) > 1 and entry[1] is kick for entry in pending):
        return
    transaction.on_commit(kick, robust=True)
