"""Taking snapshots: probing hosts over SSH, storing what they said, and the beat sweep."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.audit import context as audit_context
from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from controlplane.crypto import SecretUnavailable
from controlplane.refusals import Refused

from .. import commands, signals
from ..choices import HostKeyStatus, SnapshotStatus
from ..models import Host, StateSnapshot
from ..probe import ProbeOutcome, probe_many
from ..ssh import SSHTarget, ssh_loop
from .permissions import require_probe_permission

# --- probes ------------------------------------------------------------------------------------


def probe_spec_for(host: Host, *, integrity: bool) -> commands.ProbeSpec:
    servers = tuple(
        commands.ServerSpec(
            unit=d.unit, port=d.port, engine_python=d.engine_python, engine_dist=d.engine_dist
        )
        for d in host.deployments.all()
    )
    return commands.ProbeSpec(servers=servers, integrity=integrity)


def ssh_target_for(host: Host) -> SSHTarget | None:
    if host.credential is None:
        return None
    return SSHTarget(
        address=host.address,
        port=host.port,
        username=host.username,
        private_key=host.credential.private_key(),
        pinned_key=host.host_key if host.host_key_status == HostKeyStatus.PINNED else "",
    )


def _blocked_outcome(host: Host) -> ProbeOutcome | None:
    """Refuse before connecting when trust is already known to be broken or missing."""
    if host.host_key_status == HostKeyStatus.CHANGED:
        return ProbeOutcome(
            status=SnapshotStatus.HOST_KEY_MISMATCH,
            duration_ms=0,
            error="the host key changed; an admin must accept the new key before any command runs",
            presented_key=host.presented_host_key,
        )
    if host.credential is None:
        return ProbeOutcome(status=SnapshotStatus.ERROR, duration_ms=0, error="no SSH credential")
    return None


def hosts_probe(
    *,
    hosts: list[Host],
    trigger: str,
    integrity: bool | None = None,
    heartbeat: Callable[[], None] | None = None,
    heartbeat_every: float = 10.0,
) -> list[StateSnapshot]:
    """Probe hosts concurrently over (reused) SSH connections and store one snapshot each.

    `integrity=None` runs the engine integrity check only on hosts whose interval has passed.
    `heartbeat` is called every `heartbeat_every` seconds while the probes run (a change job
    keeping its lease).
    """
    now = timezone.now()
    jobs: list[tuple[SSHTarget, commands.ProbeSpec]] = []
    plan: list[tuple[Host, bool, ProbeOutcome | None, int | None]] = []
    for host in hosts:
        check = host.integrity_due(now) if integrity is None else integrity
        blocked = _blocked_outcome(host)
        if blocked is None:
            try:
                target = ssh_target_for(host)
            except SecretUnavailable as exc:
                blocked = ProbeOutcome(status=SnapshotStatus.ERROR, duration_ms=0, error=str(exc))
        if blocked is not None:
            plan.append((host, check, blocked, None))
            continue
        assert target is not None
        plan.append((host, check, None, len(jobs)))
        jobs.append((target, probe_spec_for(host, integrity=check)))
    outcomes: list[ProbeOutcome] = []
    if jobs:
        outcomes = ssh_loop.call(
            probe_many(
                ssh_loop.pool,
                jobs,
                concurrency=settings.PROBE_CONCURRENCY,
                connect_timeout=settings.SSH_CONNECT_TIMEOUT,
                command_timeout=settings.SSH_COMMAND_TIMEOUT,
            ),
            heartbeat=heartbeat,
            every=heartbeat_every,
        )
    items = []
    for host, check, blocked, index in plan:
        outcome = blocked if index is None else outcomes[index]
        assert outcome is not None
        items.append((host, outcome, check))
    return snapshots_record(items=items, trigger=trigger)


def host_probe(
    *,
    host: Host,
    trigger: str,
    integrity: bool | None = None,
    heartbeat: Callable[[], None] | None = None,
    heartbeat_every: float = 10.0,
) -> StateSnapshot:
    return hosts_probe(
        hosts=[host],
        trigger=trigger,
        integrity=integrity,
        heartbeat=heartbeat,
        heartbeat_every=heartbeat_every,
    )[0]


def hosts_claim_due_for_probe(now: datetime | None = None) -> list[Host]:
    """Hosts whose probe interval has passed, claimed so an overlapping sweep skips them.

    The claim is a conditional UPDATE of last_probe_at: if it changes no row, another sweep got
    there first.
    """
    now = now or timezone.now()
    candidates = (
        Host.objects.filter(enabled=True)
        .select_related("credential")
        .prefetch_related("deployments")
    )
    claimed = []
    for host in candidates:
        if not host.probe_due(now):
            continue
        if Host.objects.filter(pk=host.pk, last_probe_at=host.last_probe_at).update(
            last_probe_at=now
        ):
            claimed.append(host)
    return claimed


def snapshot_record(
    *, host: Host, outcome: ProbeOutcome, trigger: str, integrity: bool
) -> StateSnapshot:
    return snapshots_record(items=[(host, outcome, integrity)], trigger=trigger)[0]


RECORD_BATCH = 100  # snapshots per transaction: bounds how long the audit chain stays locked


def snapshots_record(
    *, items: list[tuple[Host, ProbeOutcome, bool]], trigger: str
) -> list[StateSnapshot]:
    """Store what probes saw, note key trouble on hosts, and audit it.

    Each batch is one transaction: snapshots, host bookkeeping, audit events and the drift check
    of waiting approvals commit together or not at all.
    """
    stored: list[StateSnapshot] = []
    for start in range(0, len(items), RECORD_BATCH):
        stored += _record_batch(items[start : start + RECORD_BATCH], trigger)
    return stored


@transaction.atomic
def _record_batch(
    items: list[tuple[Host, ProbeOutcome, bool]], trigger: str
) -> list[StateSnapshot]:
    now = timezone.now()
    correlation_id = audit_context.current().correlation_id
    snapshots = [
        StateSnapshot(
            host=host,
            taken_at=now,
            status=outcome.status,
            trigger=trigger,
            duration_ms=outcome.duration_ms,
            raw=outcome.raw,
            parsed=outcome.parsed,
            digest=outcome.digest,
            error=outcome.error[:4000],
            includes_integrity=integrity and outcome.status in {"ok", "partial"},
            correlation_id=correlation_id,
        )
        for host, outcome, integrity in items
    ]
    StateSnapshot.objects.bulk_create(snapshots)
    Host.objects.filter(pk__in=[h.pk for h, _, _ in items]).update(last_probe_at=now)
    checked = [s.host_id for s in snapshots if s.includes_integrity]
    if checked:
        Host.objects.filter(pk__in=checked).update(last_integrity_at=now)
    for (host, outcome, _), snapshot in zip(items, snapshots, strict=True):
        host.last_probe_at = now
        if outcome.presented_key:
            _record_presented_key(host, outcome, snapshot)
    audit.record_many(
        [
            {
                "action": AuditAction.PROBE_COMPLETED,
                "target": snapshot,
                "host": host,
                "snapshot": snapshot,
                "data": {
                    "status": snapshot.status,
                    "trigger": trigger,
                    "duration_ms": snapshot.duration_ms,
                },
            }
            for (host, _, _), snapshot in zip(items, snapshots, strict=True)
        ]
    )
    signals.snapshots_recorded.send(sender=StateSnapshot, snapshots=snapshots)
    return snapshots


def _record_presented_key(host: Host, outcome: ProbeOutcome, snapshot: StateSnapshot) -> None:
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


class QueueUnavailable(Refused):
    """The task broker did not take the job."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="queue_unavailable")


def probe_enqueue(*, host: Host, user: Any, integrity: bool = False) -> None:
    """Queue a "Probe now"; the snapshot arrives when a worker has run it."""
    require_probe_permission(user)
    from kombu.exceptions import OperationalError

    from ..tasks import probe_host

    try:
        probe_host.apply_async(
            kwargs={
                "host_id": host.pk,
                "trigger": "manual",
                "integrity": integrity or None,
                "user_id": getattr(user, "pk", None),
                "correlation_id": audit_context.current().correlation_id,
            },
            retry=True,
            retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.5},
        )
    except OperationalError as exc:
        raise QueueUnavailable(
            "The task queue is not reachable, so the probe was not queued. Is the broker up?"
        ) from exc
