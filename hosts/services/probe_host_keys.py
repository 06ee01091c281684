"""A host key a probe was shown but does not trust: remembered on the host for an admin to
review (hosts.services.registry.host_key_accept), and audited once per new key."""

from __future__ import annotations

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction

from ..choices import HostKeyStatus, SnapshotStatus
from ..models import Host, StateSnapshot
from ..probe import ProbeOutcome


def presented_key_record(host: Host, outcome: ProbeOutcome, snapshot: StateSnapshot) -> None:
    """Note the key `outcome` presents on the host's row (locked) and audit it, naming the
    snapshot; `host` is brought up to date with the row."""
    locked = Host.objects.select_for_update().get(pk=host.pk)
    key_event = _note_presented_key(locked, outcome)
    if not key_event:
        return
    locked.save(update_fields=["host_key_status", "presented_host_key"])
    host.host_key_status = locked.host_key_status
    host.presented_host_key = locked.presented_host_key
    audit.record(
        action=key_event,
        target=locked,
        snapshot=snapshot,
        data={"presented_fingerprint": locked.presented_key_fingerprint},
    )


def _note_presented_key(host: Host, outcome: ProbeOutcome) -> str:
    """Remember an untrusted key for an admin to review; return the audit action, if any."""
    if not outcome.presented_key:
        return ""
    if (
        outcome.status == SnapshotStatus.HOST_KEY_MISMATCH
        and host.host_key_status != HostKeyStatus.CHANGED
    ):
        host.host_key_status = HostKeyStatus.CHANGED
        host.presented_host_key = outcome.presented_key
        return AuditAction.HOST_KEY_CHANGED
    if (
        outcome.status == SnapshotStatus.HOST_KEY_UNKNOWN
        and host.presented_host_key != outcome.presented_key
    ):
        host.presented_host_key = outcome.presented_key
        return AuditAction.HOST_KEY_PRESENTED
    return ""
