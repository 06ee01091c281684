"""A rollout moves on as soon as one of its changes ends: the change's final audit event, once
committed, has a worker look at the rollout (beat's sweep would, later)."""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent

from .. import dispatch
from ..choices import FINAL_STATUSES, ChangeStatus
from .models import RolloutHost

# A rejection is no job's end, and a rollout's changes are never waiting for one.
CHANGE_ENDINGS = frozenset(
    AuditAction.change_ended(status) for status in FINAL_STATUSES if status != ChangeStatus.REJECTED
)


def change_ended(sender: Any, event: AuditEvent, **kwargs: Any) -> None:
    if event.action not in CHANGE_ENDINGS or event.target_type != "deployments.changerequest":
        return
    if not event.target_id.isdigit():
        return
    change_id = int(event.target_id)
    rollouts = (
        RolloutHost.objects.filter(Q(change_id=change_id) | Q(rollback_change_id=change_id))
        .values_list("rollout_id", flat=True)
        .distinct()
    )
    for rollout_id in rollouts:
        dispatch.rollout_advance_on_commit(rollout_id)
