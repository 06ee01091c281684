"""Notifications hear of audit events once their transaction has committed."""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import receiver

from controlplane.audit.models import AuditEvent
from controlplane.audit.signals import event_committed

from . import events, services

logger = logging.getLogger(__name__)


@receiver(event_committed, sender=AuditEvent, dispatch_uid="notifications-from-audit")
def _event_committed(sender: Any, event: AuditEvent, **kwargs: Any) -> None:
    if not events.might_notify(event):
        return
    # The action has committed already; the audit log sends robustly, but a notification that
    # cannot be prepared is worth a log line, not a traceback in the caller's request.
    try:
        services.deliveries_create_for_event(event=event)
    except Exception:
        logger.exception("notifications for audit event #%s were not created", event.seq)
