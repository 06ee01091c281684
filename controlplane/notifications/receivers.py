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
    # The action has committed already; an exception here would still surface in the caller
    # (on_commit callbacks are not robust), and skip the callbacks after this one, such as
    # queueing the change job itself. So nothing escapes.
    try:
        services.deliveries_create_for_event(event=event)
    except Exception:
        logger.exception("notifications for audit event #%s were not created", event.seq)
