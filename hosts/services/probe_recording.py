"""Storing what probes saw: snapshots with their raw output and GPU samples, the hosts'
bookkeeping (last probe, last status, material digest, integrity), key trouble, the audit
events, and the `snapshots_recorded` signal, one transaction per batch."""

from __future__ import annotations

from datetime import datetime

from django.db import connection, transaction
from django.db.models import Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from controlplane.audit import context as audit_context
from controlplane.canonical import canonical_digest

from .. import signals
from ..choices import READ_STATUSES, ProbeTrigger
from ..models import Host, StateSnapshot, parsed_for_storage
from ..probe import ProbeOutcome
from .blobs import raw_store
from .copy_rows import copy_create
from .probe_audit import probes_audit, verdicts
from .probe_host_keys import presented_key_record
from .samples import gpu_samples_record


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
    if snapshot.status not in READ_STATUSES:
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
    stored_raws = raw_store([outcome.raw for _, outcome, _ in items])
    stored_parsed = [
        parsed_for_storage(outcome.parsed, stored.dictionary_id)
        for (_, outcome, _), stored in zip(items, stored_raws, strict=True)
    ]
    snapshots = [
        StateSnapshot(
            host=host,
            taken_at=now,
            status=outcome.status,
            trigger=trigger,
            duration_ms=outcome.duration_ms,
            raw_index=stored.index,
            raw_packed=stored.packed,
            # the dictionary its packed sections or parsed parts need, kept while it is named
            dictionary_id=(
                stored.dictionary_id
                if stored.packed is not None or parsed is not outcome.parsed
                else None
            ),
            parsed=parsed,
            digest=outcome.digest,
            error=outcome.error[:4000],
            includes_integrity=integrity and outcome.status in READ_STATUSES,
            correlation_id=correlation_id,
        )
        for (host, outcome, integrity), stored, parsed in zip(
            items, stored_raws, stored_parsed, strict=True
        )
    ]
    if connection.vendor == "postgresql":
        copy_create(snapshots)
    else:
        StateSnapshot.objects.bulk_create(snapshots)
    for snapshot, (_, outcome, _) in zip(snapshots, items, strict=True):
        # whole, as a read from the database gives it, with the state the probe parsed
        if outcome.state is not None:
            snapshot.state_known(outcome.parsed, outcome.state)
        else:
            snapshot.parsed = outcome.parsed
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
    for s in snapshots:  # rare: an operator asked for DCGM's diagnostic
        if s.parsed.get("gpu_diagnostic"):
            Host.objects.filter(pk=s.host_id).update(gpu_diagnostic_snapshot=s)
            s.host.gpu_diagnostic_snapshot_id = s.pk  # the verdict, decided next, reads it
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
            presented_key_record(host, outcome, snapshot)
    if moved:
        Host.objects.bulk_update(moved, ["last_status", "material_digest"])
    audited = {s.pk for s in snapshots if trigger != ProbeTrigger.SCHEDULE or changes[s.pk]}
    pairs = [(h, s) for (h, _, _), s in zip(items, snapshots, strict=True)]
    probes_audit(pairs, trigger, audited, changes)
    verdicts_before = verdicts(host_ids)
    signals.snapshots_recorded.send(sender=StateSnapshot, snapshots=snapshots)
    if trigger == ProbeTrigger.SCHEDULE:
        # A verdict that moved on an otherwise unchanged probe (a benchmark, an expected
        # revision, time): the snapshot it was decided on is named in the log too.
        verdicts_after = verdicts(host_ids)
        turned = [
            (h, s)
            for h, s in pairs
            if s.pk not in audited and verdicts_before.get(h.pk) != verdicts_after.get(h.pk)
        ]
        for _, s in turned:
            changes[s.pk] = ["verdict"]
        probes_audit(turned, trigger, {s.pk for _, s in turned}, changes)
    return snapshots
