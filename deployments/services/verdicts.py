"""Keeping every host's health verdict current: gather the evidence, decide (deployments.health),
store it on HostHealth, and record a transition in the audit log (webhooks follow from there).

Called after each probe round (for the hosts it probed) and after each change job ends. A probe
round of hundreds of hosts gathers its evidence in a handful of queries, not per host.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from hosts.choices import READ_STATUSES, VERDICT_SEVERITY, SnapshotStatus, Verdict
from hosts.models import Host, HostHealth, StateSnapshot
from hosts.selectors import newest_snapshot_id
from hosts.services import hosts_rows_lock
from hosts.state import IntegrityReport

from .. import engine_faults, gpu_faults, health, kinds
from ..choices import FINAL_STATUSES, ChangeStatus
from ..evaluation.selectors import health_evaluations
from ..models import ChangeRequest, Deployment


def hosts_health_update(
    *,
    hosts: Iterable[Host],
    now: dt.datetime | None = None,
    ended_change: int | None = None,
    snapshots: Iterable[StateSnapshot] = (),
) -> list[HostHealth]:
    """Re-decide the verdict of `hosts` from what is stored now.

    `snapshots` are ones the caller holds already (a probe round's, just stored): one of them
    that is still its host's newest is used as it is instead of being read and parsed again.
    A change job running on a host is part of its evidence (the verdict is `changing` while
    what is off is what the change does). A transition while a change runs on the host (or as
    it ends: `ended_change`, or out of `changing` once it has) is recorded with that change's
    id, so notifications leave it to the job's own outcome message.
    """
    now = now or timezone.now()
    hosts = list(hosts)
    if not hosts:
        return []
    held = {s.pk: s for s in snapshots}
    running = _running_changes(hosts)
    evidence = _evidence(hosts, now, held, running)
    with transaction.atomic():
        # The hosts' rows first (the verdict rows' trigger writes them, migration hosts 0012;
        # a probe round has them locked when it gets here), then the chain, then the verdicts.
        hosts_rows_lock(h.pk for h in hosts)
        audit.chain_lock()
        # Rows locked, then the running changes read again: a job that ended (and stored its
        # own verdict) while this evidence was gathered must not be overwritten by a verdict
        # that still counts it as running. Only the hosts whose jobs moved are decided again.
        # Only the verdict rows (`of`, and ordered by the column, not by Host's ordering, which
        # would join and lock the hosts rows a probe round updates in its own transaction).
        locked = HostHealth.objects.select_for_update(of=("self",)).filter(host__in=hosts)
        stored = {h.host_id: h for h in locked.order_by("host_id")}
        now_running = _running_changes(hosts)
        moved = [h for h in hosts if _changes_on(running, h) != _changes_on(now_running, h)]
        if moved:
            evidence.update(_evidence(moved, now, held, now_running))
        running_on = {c.host_id: c.pk for c in now_running.values()}
        rows, events = _decide(hosts, evidence, stored, running_on, now, ended_change)
        _mark_maintenance(events, now)
        # One upsert for the whole round. (bulk_update's CASE per row and field cost more
        # Python than the probes it follows.)
        HostHealth.objects.bulk_create(
            rows, update_conflicts=True, unique_fields=["host"], update_fields=_ROW_FIELDS
        )
        audit.record_many(events)
    return rows


def _changes_on(running: dict[int, ChangeRequest], host: Host) -> set[int]:
    return {c.pk for c in running.values() if c.host_id == host.pk}


def _decide(
    hosts: list[Host],
    evidence: dict[int, tuple[health.HostEvidence, str, str]],
    stored: dict[int, HostHealth],
    running_on: dict[int, int],
    now: dt.datetime,
    ended_change: int | None,
) -> tuple[list[HostHealth], list[dict[str, Any]]]:
    """The verdict rows to store and the transitions to audit."""
    rows, transitions = [], []
    for host in hosts:
        facts, serving, last_change = evidence[host.pk]
        verdict = health.evaluate(facts)
        previous = stored.get(host.pk)
        before = previous.verdict if previous is not None else None
        rows.append(_row(host, verdict, facts, previous, now, (serving, last_change)))
        if before is not None and before != verdict.verdict:
            during = ended_change or running_on.get(host.pk)
            transitions.append((host, before, rows[-1], during))
    # Out of `changing` with no change running: the change just ended (and a probe round got
    # there before the job's own update), so the transition is the job's to tell too.
    ended = _last_changes_of(h.pk for h, before, _, during in transitions
                             if during is None and before == Verdict.CHANGING)  # fmt: skip
    events = [
        _transition(host, before, row, during or ended.get(host.pk))
        for host, before, row, during in transitions
    ]
    return rows, events


def host_health_update(
    *, host: Host, now: dt.datetime | None = None, ended_change: int | None = None
) -> HostHealth:
    return hosts_health_update(hosts=[host], now=now, ended_change=ended_change)[0]


_ROW_FIELDS = [
    "verdict", "severity", "reasons", "since", "computed_at", "snapshot", "last_good_snapshot",
    "serving", "last_change",
]  # fmt: skip


def _row(
    host: Host,
    verdict: health.HealthVerdict,
    facts: health.HostEvidence,
    previous: HostHealth | None,
    now: dt.datetime,
    labels: tuple[str, str],
) -> HostHealth:
    serving, last_change = labels
    row = previous or HostHealth(host=host, since=now)
    if previous is not None and previous.verdict != verdict.verdict:
        row.since = now
    row.verdict = verdict.verdict
    row.severity = VERDICT_SEVERITY[verdict.verdict]
    row.reasons = [r.as_dict() for r in verdict.reasons]
    row.computed_at = now
    row.snapshot_id = facts.snapshot.pk if facts.snapshot else None
    row.last_good_snapshot_id = facts.last_good.pk if facts.last_good else None
    row.serving = serving[:300]
    row.last_change = last_change[:300]
    return row


def _mark_maintenance(events: list[dict[str, Any]], now: dt.datetime) -> None:
    """A transition of a host in maintenance is decided, stored and audited like any other,
    and marked so that notifications leave it out: someone is working on the host and expects
    it to move. Read from the rows now, not from the caller's host objects, which a probe
    round loaded before someone may have entered or left maintenance."""
    if not events:  # most probe rounds move no verdict: no query for them
        return
    ids = [event["host"].pk for event in events]
    quiet = set(
        Host.objects.filter(pk__in=ids, maintenance_until__gt=now).values_list("pk", flat=True)
    )
    for event in events:
        event["data"]["in_maintenance"] = event["host"].pk in quiet


def _transition(
    host: Host, before: str, row: HostHealth, during_change: int | None
) -> dict[str, Any]:
    return {
        "action": AuditAction.HOST_VERDICT_CHANGED,
        "target": host,
        "host": host,
        "data": {
            "before": before,
            "after": row.verdict,
            "reasons": row.reasons,
            "during_change": during_change,
        },
    }


def _running_changes(hosts: list[Host]) -> dict[int, ChangeRequest]:
    """Per deployment, the change job running on it now (at most one per host), with the
    revisions it moves between."""
    running = ChangeRequest.objects.filter(host__in=hosts, status=ChangeStatus.RUNNING)
    related = running.select_related("from_revision", "target_revision").defer(
        "from_revision__benchmark", "target_revision__benchmark"
    )
    return {c.deployment_id: c for c in related}


def _running_evidence(change: ChangeRequest | None) -> health.RunningChange | None:
    if change is None:
        return None
    revisions = [r for r in (change.target_revision, change.from_revision) if r is not None]
    return health.RunningChange(
        pk=change.pk,
        kind=change.get_kind_display(),
        by=change.requested_by_name,
        started_at=change.started_at,
        unit_sha256s=frozenset(r.unit_sha256 for r in revisions),
        models=frozenset(m for m in (r.plan.model for r in revisions) if m),
    )


def _last_changes_of(host_ids: Iterable[int]) -> dict[int, int]:
    """Per host, its most recently started change."""
    ids = list(host_ids)
    if not ids:
        return {}
    started = ChangeRequest.objects.filter(host__in=ids, started_at__isnull=False)
    return dict(started.order_by("host_id", "started_at").values_list("host_id", "pk"))


def _evidence(
    hosts: list[Host],
    now: dt.datetime,
    known: dict[int, StateSnapshot],
    running: dict[int, ChangeRequest],
) -> dict[int, tuple[health.HostEvidence, str, str]]:
    host_ids = [h.pk for h in hosts]
    latest = _latest_snapshots_where(host_ids, known=known)
    needs_last_good = [
        h.pk for h in hosts if getattr(latest.get(h.pk), "status", None) != SnapshotStatus.OK
    ]
    last_good = _latest_snapshots_where(needs_last_good, status=SnapshotStatus.OK)
    deployments = list(
        Deployment.objects.filter(host__in=hosts)
        .select_related("model", "current_revision__model")
        .defer("current_revision__benchmark")  # results JSON the verdict does not read
    )
    deployments_of: dict[int, list[Deployment]] = {}
    for dep in deployments:
        deployments_of.setdefault(dep.host_id, []).append(dep)
    integrity = _latest_integrity(deployments)
    diagnosed = StateSnapshot.objects.in_bulk(
        [h.gpu_diagnostic_snapshot_id for h in hosts if h.gpu_diagnostic_snapshot_id]
    )
    changes = _last_finished_changes(deployments)
    evaluations = health_evaluations(deployments)
    out = {}
    for host in hosts:
        units = []
        labels, change_texts = [], []
        for dep in deployments_of.get(host.pk, ()):
            unit, label, change_text = _unit_evidence(
                dep, changes.get(dep.pk), integrity.get(dep.pk), evaluations.get(dep.pk),
                _running_evidence(running.get(dep.pk)),
            )  # fmt: skip
            units.append(unit)
            labels.append(label)
            change_texts.append(change_text)
        current = latest.get(host.pk)
        good = current if current is not None and current.status == SnapshotStatus.OK else None
        facts = health.HostEvidence(
            name=host.name,
            key_status=host.host_key_status,
            probe_interval_seconds=host.probe_interval_seconds,
            now=now,
            snapshot=_facts(current),
            last_good=_facts(good or last_good.get(host.pk)),
            units=tuple(units),
            previous=_previous_facts(current),
            gpu_diagnostic=_facts(diagnosed.get(host.gpu_diagnostic_snapshot_id or 0)),
        )
        out[host.pk] = (facts, "; ".join(labels), "; ".join(t for t in change_texts if t))
    return out


def _unit_evidence(
    dep: Deployment,
    change: ChangeRequest | None,
    report: IntegrityReport | None,
    evaluation: health.Evaluation | None = None,
    running: health.RunningChange | None = None,
) -> tuple[health.UnitEvidence, str, str]:
    revision = dep.current_revision
    model = revision.model if revision is not None else dep.model
    plan = revision.plan if revision is not None else None
    label = f"{model.served_name} · {model.name} ({model.variant})"
    outcome = None
    change_text = ""
    if change is not None:
        outcome = health.ChangeOutcome(
            pk=change.pk, kind=change.get_kind_display(), status=change.status,
            reason=change.status_reason, by=change.requested_by_name,
            finished_at=change.finished_at,
            leaves_unit_stopped=kinds.spec(change.kind).leaves_unit_stopped,
        )  # fmt: skip
        change_text = f"#{change.pk} {change.get_kind_display()}: {change.get_status_display()}"
    unit = health.UnitEvidence(
        unit=dep.unit,
        model_label=label,
        plan=plan,
        expected_unit_sha256=revision.unit_sha256 if revision is not None else None,
        last_change=outcome,
        integrity=report,
        evaluation=evaluation,
        running=running,
        load_timeout_seconds=dep.load_timeout_seconds,
        declared_gpus=dep.tensor_parallel_size,
    )
    return unit, label, change_text


def _facts(snapshot: StateSnapshot | None) -> health.SnapshotFacts | None:
    if snapshot is None:
        return None
    return health.SnapshotFacts(
        pk=snapshot.pk,
        status=snapshot.status,
        taken_at=snapshot.taken_at,
        error=snapshot.error,
        state=snapshot.state(),
    )


def _previous_facts(current: StateSnapshot | None) -> health.SnapshotFacts | None:
    """The readable snapshot before `current`, read only where a rule compares two probes
    (rising NVLink counters, an engine that stalled): rare, so one query each."""
    if current is None or current.status not in READ_STATUSES:
        return None
    state = current.state()
    if not (gpu_faults.needs_previous(state) or engine_faults.needs_previous(state)):
        return None
    before = (
        StateSnapshot.objects.filter(host_id=current.host_id, status__in=READ_STATUSES)
        .filter(taken_at__lte=current.taken_at)
        .exclude(pk=current.pk)
        .order_by("-taken_at", "-id")
        .first()
    )
    return _facts(before)


def _newest_ids(host_ids: list[int], **where: Any) -> list[int]:
    """The id of each host's newest snapshot matching `where`, in one query."""
    ids = (
        Host.objects.filter(pk__in=host_ids)
        .annotate(newest=newest_snapshot_id(**where))
        .values_list("newest", flat=True)
    )
    return [i for i in ids if i is not None]


def _latest_snapshots_where(
    host_ids: list[int], known: dict[int, StateSnapshot] | None = None, **where: Any
) -> dict[int, StateSnapshot]:
    """The newest snapshot per host matching `where`: those in `known` as they are, the rest
    read in one query."""
    if not host_ids:
        return {}
    known = known or {}
    ids = _newest_ids(host_ids, **where)
    found = [known[i] for i in ids if i in known]
    found += StateSnapshot.objects.filter(pk__in=[i for i in ids if i not in known])
    return {s.host_id: s for s in found}


def _latest_integrity(deployments: list[Deployment]) -> dict[int, IntegrityReport | None]:
    """Per deployment, the engine check of its unit in its host's newest snapshot that checked
    the engine's files. Only that report is read from each snapshot, not the whole state: the
    check runs hourly, and every probe round in between would otherwise parse it again."""
    ids = _newest_ids(sorted({d.host_id for d in deployments}), includes_integrity=True)
    if not ids:
        return {}
    units = sorted({d.unit for d in deployments})
    reports = [
        KeyTransform("integrity", KeyTransform(unit, KeyTransform("deployments", "parsed")))
        for unit in units
    ]
    rows = {
        row[0]: row[1:]
        for row in StateSnapshot.objects.filter(pk__in=ids).values_list("host_id", *reports)
    }
    out = {}
    for dep in deployments:
        row = rows.get(dep.host_id)
        if row is not None:
            out[dep.pk] = IntegrityReport.from_json(row[units.index(dep.unit)])
    return out


def _last_finished_changes(deployments: list[Deployment]) -> dict[int, ChangeRequest]:
    """Per deployment, its most recently finished change (which decides "last change")."""
    if not deployments:
        return {}
    finished = ChangeRequest.objects.filter(
        deployment__in=deployments, status__in=FINAL_STATUSES, finished_at__isnull=False
    ).exclude(status__in=[ChangeStatus.REJECTED, ChangeStatus.CANCELLED])
    last = finished.values("deployment_id").annotate(at=Max("finished_at"))
    wanted = {(row["deployment_id"], row["at"]) for row in last}
    rows = finished.filter(finished_at__in=[at for _, at in wanted])
    return {c.deployment_id: c for c in rows if (c.deployment_id, c.finished_at) in wanted}
