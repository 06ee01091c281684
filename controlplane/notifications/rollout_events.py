"""What each rollout event says as a notification (deployments.rollouts writes the events):
approval needed, approved or rejected, each wave started and passed, halted (which check failed
where), the failed wave rolled back, succeeded, aborted, failed. events.py wraps these."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from deployments.models import Rollout

from .choices import EventType

A = AuditAction
ROLLOUT_EVENTS: dict[str, str] = {
    A.ROLLOUT_REQUESTED: EventType.ROLLOUT_APPROVAL_NEEDED,
    A.ROLLOUT_APPROVED: EventType.ROLLOUT_APPROVED,
    A.ROLLOUT_REJECTED: EventType.ROLLOUT_REJECTED,
    A.ROLLOUT_WAVE_STARTED: EventType.ROLLOUT_WAVE_STARTED,
    A.ROLLOUT_WAVE_PASSED: EventType.ROLLOUT_WAVE_PASSED,
    A.ROLLOUT_HALTED: EventType.ROLLOUT_HALTED,
    A.ROLLOUT_ROLLED_BACK: EventType.ROLLOUT_ROLLED_BACK,
    A.ROLLOUT_SUCCEEDED: EventType.ROLLOUT_SUCCEEDED,
    A.ROLLOUT_ABORTED: EventType.ROLLOUT_ABORTED,
    A.ROLLOUT_FAILED: EventType.ROLLOUT_FAILED,
}


def _hosts(entries: list[Any]) -> str:
    shown = [
        f"{h.get('host')} {str(h.get('status', '')).replace('_', ' ')}".strip()
        if isinstance(h, dict)
        else str(h)
        for h in entries
    ]
    return ", ".join(shown) or "no host"


def rollout_notification(event: AuditEvent) -> tuple[str, str, str, dict[str, Any]] | None:
    """(event type, text, path of the rollout's page, data) for a rollout event, or None."""
    kind = ROLLOUT_EVENTS.get(event.action)
    if kind is None or event.target_type != "deployments.rollout":
        return None
    rollout = (
        Rollout.objects.select_related("model").filter(pk=int(event.target_id)).first()
        if event.target_id.isdigit()
        else None
    )
    if rollout is None:
        return None
    data = event.data or {}
    name = f"Rollout #{rollout.pk} ({rollout.label})"
    reason = data.get("reason") or ""
    texts: dict[str, str] = {
        A.ROLLOUT_REQUESTED: f"{event.actor} requested rollout #{rollout.pk}: {rollout.label} "
        f"over {len(data.get('hosts') or [])} hosts in {data.get('waves')} waves; it needs "
        f"approval by a second person. Reason: {reason}",
        A.ROLLOUT_APPROVED: f"{event.actor} approved {name} for "
        f"{len(data.get('hosts') or [])} hosts"
        + (f"; skipped: {'; '.join(data['skipped'])}" if data.get("skipped") else "")
        + ". It starts now.",
        A.ROLLOUT_REJECTED: f"{event.actor} rejected {name}. Reason: {reason}",
        A.ROLLOUT_WAVE_STARTED: f"{name}: {data.get('label')} started on "
        f"{_hosts(data.get('hosts') or [])}.",
        A.ROLLOUT_WAVE_PASSED: f"{name}: {data.get('label')} passed "
        f"({_hosts(data.get('hosts') or [])}).",
        A.ROLLOUT_HALTED: f"{name} halted: {reason}",
        A.ROLLOUT_ROLLED_BACK: f"{name}: {data.get('label')} rolled back "
        f"({_hosts(data.get('hosts') or [])}).",
        A.ROLLOUT_SUCCEEDED: f"{name} succeeded: {reason}.",
        A.ROLLOUT_ABORTED: f"{event.actor} aborted {name}. Reason: {reason}",
        A.ROLLOUT_FAILED: f"{name} failed: {reason}",
    }
    payload = {
        "rollout": {
            "id": rollout.pk,
            "kind": rollout.kind,
            "model": str(rollout.model) if rollout.model else None,
            "status": rollout.status,
            "requested_by": rollout.requested_by_name,
        },
        **{k: data[k] for k in ("wave", "hosts", "failures", "skipped") if k in data},
    }
    return kind, texts[event.action], reverse("rollouts:detail", args=[rollout.pk]), payload
