"""From audit events to notifications: which events notify, and the sentence each one says.

The audit log already records every decision and step with its actor, host and snapshot, so
notifications are derived from it (after the event's transaction commits) instead of being
sent from inside the services that act.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.urls import reverse

from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from deployments.choices import ChangeKind, ChangeStatus
from deployments.models import ChangeRequest
from hosts.choices import VERDICT_SEVERITY, SnapshotStatus, Verdict
from hosts.models import Host, StateSnapshot

from .choices import EventType
from .rollout_events import ROLLOUT_EVENTS, rollout_notification

# The job's final audit event is `change.<status>`; a rejection has its own notification.
JOB_OUTCOMES: dict[str, str] = {
    AuditAction.change_ended(status): status
    for status in (
        ChangeStatus.SUCCEEDED,
        ChangeStatus.FAILED,
        ChangeStatus.ROLLED_BACK,
        ChangeStatus.DRIFTED,
        ChangeStatus.CANCELLED,
        ChangeStatus.INTERRUPTED,
    )
}
APPROVALS = {AuditAction.CHANGE_APPROVED, AuditAction.CHANGE_BREAK_GLASS}
NOTIFYING_ACTIONS = {
    AuditAction.CHANGE_REQUESTED,
    AuditAction.CHANGE_REJECTED,
    AuditAction.HOST_KEY_CHANGED,
    AuditAction.HOST_VERDICT_CHANGED,
    AuditAction.PROBE_COMPLETED,
    *APPROVALS,
    *JOB_OUTCOMES,
    *ROLLOUT_EVENTS,
}
MAX_DRIFT_FIELDS = 5


@dataclass(frozen=True)
class Notification:
    event_type: str
    text: str
    link: str
    data: dict[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """Slack-compatible: `text` (and `blocks`) are what Slack shows; `event` and `data` are
        for receivers that act on notifications."""
        link = self.link
        shown = _mrkdwn(self.text)
        if link.startswith(("http://", "https://")):
            shown += f" <{link}|open>"
        else:
            shown += f" ({_mrkdwn(link)})"
        context = f"`{self.event_type}` · audit #{self.data.get('audit_seq', '-')}"
        return {
            "text": f"{self.text} {link}",
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn", "text": shown}},
                {"type": "context", "elements": [{"type": "mrkdwn", "text": context}]},
            ],
            "event": self.event_type,
            "data": {**self.data, "link": link},
        }


def _mrkdwn(text: str) -> str:
    # Slack's three control characters in message text.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def link_to(path: str) -> str:
    base = settings.CONTROLPLANE_BASE_URL.rstrip("/")
    return f"{base}{path}" if base else path


def might_notify(event: AuditEvent) -> bool:
    """A check without queries, so the many events that never notify cost nothing."""
    if event.action not in NOTIFYING_ACTIONS:
        return False
    data = event.data or {}
    if event.action == AuditAction.CHANGE_REQUESTED:
        # A rollout's change is granted under the rollout's approval as it is made.
        return bool(data.get("needs_approval")) and not data.get("rollout")
    if event.action == AuditAction.PROBE_COMPLETED:
        return data.get("status") == SnapshotStatus.UNREACHABLE
    if event.action == AuditAction.HOST_VERDICT_CHANGED:
        return _verdict_notification_type(data) is not None
    return True


def notifications_for(event: AuditEvent) -> list[Notification]:
    if not might_notify(event):
        return []
    if event.action == AuditAction.PROBE_COMPLETED:
        return _host_unreachable(event)
    if event.action == AuditAction.HOST_KEY_CHANGED:
        return [_host_key_changed(event)]
    if event.action == AuditAction.HOST_VERDICT_CHANGED:
        return [_verdict_changed(event)]
    if event.action in ROLLOUT_EVENTS:
        found = rollout_notification(event)
        if found is None:
            return []
        kind, text, path, data = found
        return [Notification(kind, text, link_to(path), {**_common(event), **data})]
    change = _change_of(event)
    if change is None:
        return []
    base = _change_data(event, change)
    desc = _describe(change)
    data = event.data or {}
    if event.action == AuditAction.CHANGE_REQUESTED:
        target = data.get("target_model")
        to_model = f" to {target}" if change.kind == ChangeKind.MODEL_SWAP and target else ""
        text = (
            f"{event.actor} requested {_a(change)} of {change.deployment.unit} on "
            f"{change.host.name}{to_model}; it needs approval by a second person "
            f"(change #{change.pk}). Reason: {change.reason}"
        )
        return [Notification(EventType.APPROVAL_NEEDED, text, base["link"], base["data"])]
    if event.action in APPROVALS:
        how = (
            " by break-glass, without a second person"
            if event.action == AuditAction.CHANGE_BREAK_GLASS
            else ""
        )
        reason = f" Reason: {data['reason']}" if data.get("reason") else ""
        text = f"{event.actor} approved change #{change.pk} ({desc}){how}; it is queued to run."
        return [Notification(EventType.CHANGE_APPROVED, text + reason, base["link"], base["data"])]
    if event.action == AuditAction.CHANGE_REJECTED:
        text = f"{event.actor} rejected change #{change.pk} ({desc}). Reason: {data.get('reason')}"
        return [Notification(EventType.CHANGE_REJECTED, text, base["link"], base["data"])]
    outcome = JOB_OUTCOMES[event.action]
    reason = data.get("reason") or change.status_reason
    finished = {**base["data"], "outcome": outcome}
    text = (
        f"Change #{change.pk} ({desc}, requested by {change.requested_by_name}) "
        f"{ChangeStatus(outcome).label}" + (f": {reason}" if reason else ".")
    )
    notes = [Notification(EventType.JOB_FINISHED, text, base["link"], finished)]
    if outcome == ChangeStatus.DRIFTED:
        notes.append(_drift(event, change, base))
    return notes


def _a(change: ChangeRequest) -> str:
    label = ChangeKind(change.kind).label
    return f"{'an' if label[0] in 'aeiou' else 'a'} {label}"


def _describe(change: ChangeRequest) -> str:
    return f"{ChangeKind(change.kind).label} of {change.deployment.unit} on {change.host.name}"


def _change_of(event: AuditEvent) -> ChangeRequest | None:
    if event.target_type != "deployments.changerequest" or not event.target_id.isdigit():
        return None
    return (
        ChangeRequest.objects.select_related(
            "host", "deployment", "from_revision__model", "target_revision__model"
        )
        .filter(pk=int(event.target_id))
        .first()
    )


def _common(event: AuditEvent) -> dict[str, Any]:
    return {
        "audit_seq": event.seq,
        "action": event.action,
        "actor": event.actor,
        "host": event.host_label or None,
        "at": event.created_at.isoformat(),
        "correlation_id": event.correlation_id or None,
        "snapshot_id": event.snapshot_id,
    }


def _change_data(event: AuditEvent, change: ChangeRequest) -> dict[str, Any]:
    link = link_to(reverse("deployments:change", args=[change.pk]))
    from_model = change.from_revision.model if change.from_revision else None
    to_model = change.target_revision.model if change.target_revision else None
    data = {
        **_common(event),
        "change": {
            "id": change.pk,
            "kind": change.kind,
            "status": change.status,
            "unit": change.deployment.unit,
            "requested_by": change.requested_by_name,
            "reason": change.reason,
            "from_model": str(from_model) if from_model else None,
            "to_model": str(to_model) if to_model else None,
        },
    }
    return {"link": link, "data": data}


def _drift(event: AuditEvent, change: ChangeRequest, base: dict[str, Any]) -> Notification:
    drift = (event.data or {}).get("drift") or change.drift_report or []
    fields = "; ".join(
        f"{d.get('field')}: {d.get('before')} → {d.get('after')}" for d in drift[:MAX_DRIFT_FIELDS]
    )
    more = f" and {len(drift) - MAX_DRIFT_FIELDS} more" if len(drift) > MAX_DRIFT_FIELDS else ""
    text = (
        f"Drift on {change.host.name}: change #{change.pk} ({_describe(change)}) was stopped "
        "because the host changed since the snapshot it was decided on"
        + (f" ({fields}{more})." if fields else ".")
    )
    data = {**base["data"], "drift": drift}
    return Notification(EventType.DRIFT_DETECTED, text, base["link"], data)


def _verdict_notification_type(data: dict[str, Any]) -> str | None:
    """Worse and now degraded or failed: host.degraded; healthy again: host.recovered. Into or
    out of "unknown" is the unreachable notification's business, and a transition during (or
    at the end of) a change job is the job's: its outcome is notified on its own. A host in
    maintenance notifies nothing."""
    before, after = data.get("before"), data.get("after")
    if data.get("during_change"):
        return None
    if data.get("in_maintenance"):  # someone is working on the host (hosts.services.maintenance)
        return None
    if before not in VERDICT_SEVERITY or after not in VERDICT_SEVERITY:
        return None
    if after == Verdict.HEALTHY and before != Verdict.HEALTHY:
        return EventType.HOST_RECOVERED
    if after in (Verdict.DEGRADED, Verdict.FAILED) and (
        VERDICT_SEVERITY[after] > VERDICT_SEVERITY[before] or before == Verdict.UNKNOWN
    ):
        return EventType.HOST_DEGRADED
    return None


def _verdict_changed(event: AuditEvent) -> Notification:
    data = event.data or {}
    kind = _verdict_notification_type(data)
    assert kind is not None  # might_notify checked it
    host = event.host_label or event.target_label
    reasons = [r.get("text", "") for r in data.get("reasons") or [] if isinstance(r, dict)]
    text = f"{host} is {data['after']} (was {data['before']})"
    text += f": {'; '.join(reasons[:3])}." if reasons else "."
    payload = {**_common(event), "before": data["before"], "after": data["after"],
               "reasons": data.get("reasons") or []}  # fmt: skip
    return Notification(kind, text, link_to(reverse("hosts:detail", args=[host])), payload)


def _host_key_changed(event: AuditEvent) -> Notification:
    host = event.host_label or event.target_label
    fingerprint = (event.data or {}).get("presented_fingerprint") or "unknown"
    text = (
        f"{host} presented a different SSH host key ({fingerprint}); every command to it is "
        "blocked until an administrator accepts the new key."
    )
    data = {**_common(event), "presented_fingerprint": fingerprint}
    return Notification(
        EventType.HOST_KEY_CHANGED, text, link_to(reverse("hosts:detail", args=[host])), data
    )


def _in_maintenance_at(snapshot: StateSnapshot) -> bool:
    """Whether the snapshot's host was in maintenance when it was taken (someone working on a
    host may well reboot it): read from the host's row, which holds its current maintenance."""
    return Host.objects.filter(
        pk=snapshot.host_id,
        maintenance_since__lte=snapshot.taken_at,
        maintenance_until__gt=snapshot.taken_at,
    ).exists()


def _host_unreachable(event: AuditEvent) -> list[Notification]:
    """Only the probe that finds a host newly unreachable notifies, not every probe after it."""
    if event.snapshot_id is None:
        return []
    snapshot = (
        StateSnapshot.objects.only("id", "host_id", "taken_at", "status", "error")
        .filter(pk=event.snapshot_id)
        .first()
    )
    if snapshot is None or _in_maintenance_at(snapshot):
        return []
    previous = (
        StateSnapshot.objects.filter(host_id=snapshot.host_id)
        .filter(
            Q(taken_at__lt=snapshot.taken_at) | Q(taken_at=snapshot.taken_at, id__lt=snapshot.pk)
        )
        .order_by("-taken_at", "-id")
        .values_list("status", flat=True)
        .first()
    )
    if previous == SnapshotStatus.UNREACHABLE:
        return []
    host = event.host_label
    error = snapshot.error.strip().splitlines()[0][:200] if snapshot.error.strip() else ""
    text = f"{host} is unreachable" + (f": {error}" if error else ".")
    if previous:
        text += f" Its previous probe was {previous}."
    data = {**_common(event), "error": error, "previous_status": previous}
    return [
        Notification(
            EventType.HOST_UNREACHABLE, text, link_to(reverse("hosts:detail", args=[host])), data
        )
    ]
