"""Taking snapshots: probing hosts over SSH, storing what they said, and the beat sweep."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from controlplane.audit import context as audit_context
from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from controlplane.canonical import canonical_digest
from controlplane.crypto import SecretUnavailable
from controlplane.refusals import Refused

from .. import commands, signals
from ..choices import HostKeyStatus, ProbeTrigger, SnapshotStatus
from ..models import Host, HostHealth, StateSnapshot
from ..probe import ProbeOutcome, probe_many
from ..ssh import SSHTarget, ssh_loop
from .blobs import raw_store
from .permissions import require_probe_permission
from .probe_spec import last_seen_states_prefetch, server_specs, spec_with_named_files
from .samples import gpu_samples_record

# --- probes ------------------------------------------------------------------------------------


def probe_spec_for(host: Host, *, integrity: bool) -> commands.ProbeSpec:
    """The probe of `host`: its deployments' servers, with the environment files their units
    named in the host's last snapshot, and a journal tail for a unit last seen failing
    (hosts.services.probe_spec). One query for the last snapshot per host."""
    return commands.ProbeSpec(servers=server_specs(host), integrity=integrity, sudo=host.use_sudo)


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
    if len(hosts) > 1:
        last_seen_states_prefetch(hosts)
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
    outcomes = _run_probes(jobs, heartbeat, heartbeat_every)
    # Units that turned out to name environment files this probe did not read: read them now.
    again = {}
    for i, ((target, spec), outcome) in enumerate(zip(jobs, outcomes, strict=True)):
        respec = spec_with_named_files(spec, outcome.parsed) if outcome.parsed else None
        if respec is not None:
            again[i] = (target, respec)
    if again:
        redone = _run_probes(list(again.values()), heartbeat, heartbeat_every)
        for i, second in zip(again, redone, strict=True):
            outcomes[i] = second
    items = []
    for host, check, blocked, index in plan:
        chosen = blocked if index is None else outcomes[index]
        assert chosen is not None
        items.append((host, chosen, check))
    return snapshots_record(items=items, trigger=trigger)


def _run_probes(
    jobs: list[tuple[SSHTarget, commands.ProbeSpec]],
    heartbeat: Callable[[], None] | None,
    every: float,
) -> list[ProbeOutcome]:
    if not jobs:
        return []

    async def round_of_probes() -> list[ProbeOutcome]:
        pool = ssh_loop.pool
        await pool.close_idle(settings.SSH_IDLE_SECONDS)
        return await probe_many(
            pool,
            jobs,
            concurrency=settings.PROBE_CONCURRENCY,
            connect_timeout=settings.SSH_CONNECT_TIMEOUT,
            command_timeout=settings.SSH_COMMAND_TIMEOUT,
        )

    return ssh_loop.call(round_of_probes(), heartbeat=heartbeat, every=every)


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


def claim_expiry_seconds(interval: int) -> float:
    """How long a claim holds: its batch's queue expiry (the interval) plus the longest a
    batch that started can still take. A claim older than that lost its batch."""
    return (
        max(interval, settings.PROBE_SWEEP_SECONDS)
        + settings.SSH_CONNECT_TIMEOUT
        + settings.SSH_COMMAND_TIMEOUT
    )


def hosts_claim_due_ids(
    now: datetime | None = None, *, lookahead_seconds: float = 0.0, limit: int | None = None
) -> list[tuple[int, int]]:
    """`(id, probe interval)` of the hosts whose interval has passed (or will within
    `lookahead_seconds`), most overdue first, claimed so that an overlapping sweep skips them.

    One transaction: the due rows are locked FOR UPDATE SKIP LOCKED (a sweep running at the
    same moment on another worker takes the others) and their probe_claimed_at set to the slot
    their probe is for (see below). last_probe_at stays as it was until the snapshot is stored,
    so a host whose batch was lost (expired in a dead worker's queue) stays the most overdue
    and is claimed first again once its claim expires, instead of waiting behind hosts that
    were probed.
    """
    now = now or timezone.now()
    enabled = Host.objects.filter(enabled=True)
    intervals = sorted(set(enabled.values_list("probe_interval_seconds", flat=True)))
    due = Q(last_probe_at__isnull=True, probe_claimed_at__isnull=True)
    for interval in intervals:
        cutoff = now - timedelta(seconds=interval - lookahead_seconds)
        lost = now - timedelta(seconds=claim_expiry_seconds(interval))
        unclaimed = Q(probe_claimed_at__isnull=True) | Q(probe_claimed_at__lte=lost)
        due |= (
            Q(probe_interval_seconds=interval)
            & unclaimed
            & (Q(last_probe_at__isnull=True) | Q(last_probe_at__lte=cutoff))
        )
    with transaction.atomic():
        rows = (
            enabled.filter(due)
            .order_by(F("last_probe_at").asc(nulls_first=True), "pk")
            .select_for_update(skip_locked=True)
            .values_list("pk", "probe_interval_seconds")
        )
        claimed = list(rows[:limit] if limit else rows)
        by_interval: dict[int, list[int]] = {}
        for pk, interval in claimed:
            by_interval.setdefault(interval, []).append(pk)
        for interval, pks in by_interval.items():
            # The claim names the probe's slot: when it fell due, or now if that has passed. A
            # host claimed a little early (the look-ahead) keeps its exact cadence; one that is
            # late counts its next interval from now rather than catching up in a burst.
            due_at = F("last_probe_at") + timedelta(seconds=interval)
            Host.objects.filter(pk__in=pks).update(
                probe_claimed_at=Greatest(Coalesce(due_at, Value(now)), Value(now))
            )
    return claimed


def hosts_claim_due_for_probe(
    now: datetime | None = None, *, lookahead_seconds: float = 0.0, limit: int | None = None
) -> list[Host]:
    """The hosts `hosts_claim_due_ids` claims, loaded for probing."""
    ids = [
        pk for pk, _ in hosts_claim_due_ids(now, lookahead_seconds=lookahead_seconds, limit=limit)
    ]
    if not ids:
        return []
    claimed = Host.objects.filter(pk__in=ids).select_related("credential")
    return list(claimed.prefetch_related("deployments"))


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

    Every probe that someone asked for (probe now, the command line, a change job) writes a
    `probe.completed` event. A scheduled probe writes one only when the host's status or
    material fingerprint differs from its previous snapshot, or its verdict changed with it:
    a fleet probed every minute would otherwise write a million events a day that say
    "nothing changed". The snapshots those events name are kept by retention forever.
    """
    stored: list[StateSnapshot] = []
    for start in range(0, len(items), RECORD_BATCH):
        stored += _record_batch(items[start : start + RECORD_BATCH], trigger)
    return stored


def material_digest(snapshot: StateSnapshot) -> str:
    """The digest of what a decision rests on; empty when the probe did not reach the host."""
    if snapshot.status not in (SnapshotStatus.OK, SnapshotStatus.PARTIAL):
        return ""
    return canonical_digest(snapshot.material_fingerprint())


def _changes(host_row: tuple[str, str] | None, snapshot: StateSnapshot, digest: str) -> list[str]:
    """What differs from the host's previous snapshot: first, status, material."""
    if host_row is None or not host_row[0]:
        return ["first"]
    last_status, last_digest = host_row
    changed = []
    if last_status != snapshot.status:
        changed.append("status")
    if last_digest != digest:
        changed.append("material")
    return changed


@transaction.atomic
def _record_batch(
    items: list[tuple[Host, ProbeOutcome, bool]], trigger: str
) -> list[StateSnapshot]:
    now = timezone.now()
    correlation_id = audit_context.current().correlation_id
    raw_indexes = raw_store([outcome.raw for _, outcome, _ in items])
    snapshots = [
        StateSnapshot(
            host=host,
            taken_at=now,
            status=outcome.status,
            trigger=trigger,
            duration_ms=outcome.duration_ms,
            raw_index=raw_index,
            parsed=outcome.parsed,
            digest=outcome.digest,
            error=outcome.error[:4000],
            includes_integrity=integrity and outcome.status in {"ok", "partial"},
            correlation_id=correlation_id,
        )
        for (host, outcome, integrity), raw_index in zip(items, raw_indexes, strict=True)
    ]
    StateSnapshot.objects.bulk_create(snapshots)
    # the charts' rows commit with their snapshots, so a chart never disagrees with history
    gpu_samples_record(snapshots=snapshots)
    host_ids = [h.pk for h, _, _ in items]
    previous: dict[int, tuple[str, str]] = {}
    began: dict[int, datetime] = {}
    for pk, status, digest, claimed_at in Host.objects.filter(pk__in=host_ids).values_list(
        "pk", "last_status", "material_digest", "probe_claimed_at"
    ):
        previous[pk] = (status, digest)
        # a scheduled probe began at its claim: the next one is due an interval after that,
        # however long this round took to store
        began[pk] = claimed_at if trigger == ProbeTrigger.SCHEDULE and claimed_at else now
    if trigger == ProbeTrigger.SCHEDULE:
        Host.objects.filter(pk__in=host_ids).update(
            last_probe_at=Coalesce("probe_claimed_at", Value(now)), probe_claimed_at=None
        )
    else:
        Host.objects.filter(pk__in=host_ids).update(last_probe_at=now)
    checked = [s.host_id for s in snapshots if s.includes_integrity]
    if checked:
        Host.objects.filter(pk__in=checked).update(last_integrity_at=now)
    changes: dict[int, list[str]] = {}
    moved: list[Host] = []
    for (host, outcome, _), snapshot in zip(items, snapshots, strict=True):
        host.last_probe_at = began.get(host.pk, now)
        digest = material_digest(snapshot)
        changes[snapshot.pk] = _changes(previous.get(host.pk), snapshot, digest)
        if changes[snapshot.pk]:
            host.last_status, host.material_digest = snapshot.status, digest
            moved.append(host)
        if outcome.presented_key:
            _record_presented_key(host, outcome, snapshot)
    if moved:
        Host.objects.bulk_update(moved, ["last_status", "material_digest"])
    audited = {s.pk for s in snapshots if trigger != ProbeTrigger.SCHEDULE or changes[s.pk]}
    _audit_probes([(h, s) for (h, _, _), s in zip(items, snapshots, strict=True)], trigger,
                  audited, changes)  # fmt: skip
    verdicts_before = _verdicts(host_ids)
    signals.snapshots_recorded.send(sender=StateSnapshot, snapshots=snapshots)
    if trigger == ProbeTrigger.SCHEDULE:
        # A verdict that moved on an otherwise unchanged probe (a benchmark, an expected
        # revision, time): the snapshot it was decided on is named in the log too.
        verdicts_after = _verdicts(host_ids)
        turned = [
            (h, s)
            for (h, _, _), s in zip(items, snapshots, strict=True)
            if s.pk not in audited and verdicts_before.get(h.pk) != verdicts_after.get(h.pk)
        ]
        for _, s in turned:
            changes[s.pk] = ["verdict"]
        _audit_probes(turned, trigger, {s.pk for _, s in turned}, changes)
    return snapshots


def _verdicts(host_ids: list[int]) -> dict[int, str]:
    return dict(HostHealth.objects.filter(host_id__in=host_ids).values_list("host_id", "verdict"))


def _audit_probes(
    pairs: list[tuple[Host, StateSnapshot]],
    trigger: str,
    audited: set[int],
    changes: dict[int, list[str]],
) -> None:
    entries = []
    for host, snapshot in pairs:
        if snapshot.pk not in audited:
            continue
        data: dict[str, Any] = {
            "status": snapshot.status,
            "trigger": trigger,
            "duration_ms": snapshot.duration_ms,
        }
        if trigger == ProbeTrigger.SCHEDULE:
            data["changed"] = changes[snapshot.pk]
        entries.append(
            {
                "action": AuditAction.PROBE_COMPLETED,
                "target": snapshot,
                "host": host,
                "snapshot": snapshot,
                "data": data,
            }
        )
    audit.record_many(entries)


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
