"""The reads behind one Prometheus scrape: a handful of queries whatever the fleet size.

Every number comes from rows the control plane already keeps (hosts, their newest snapshot,
change requests, audit verifications); nothing is counted in request code.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Case, Count, Exists, Min, OuterRef, Q, QuerySet, Subquery, When
from django.utils import timezone

from controlplane.accounts.roles import Scope
from controlplane.audit.models import AuditEvent, AuditVerification
from controlplane.audit.selectors import verification_latest
from deployments.choices import ACTIVE_JOB_STATUSES, ChangeStatus, EvaluationKind
from deployments.models import (
    Approval,
    ChangeRequest,
    Deployment,
    DeploymentRevision,
    Evaluation,
    Rollout,
    RolloutHost,
)
from deployments.rollouts.choices import ACTIVE_ROLLOUT_STATUSES
from hosts.models import Host, StateSnapshot
from hosts.selectors import newest_snapshot_id

# The snapshot columns a scrape reads: never `raw`, which holds every command's output.
SNAPSHOT_FIELDS = ("id", "host_id", "taken_at", "status", "duration_ms", "parsed")


@dataclass
class HostRow:
    id: int
    name: str
    enabled: bool
    host_key_status: str
    snapshot: StateSnapshot | None
    verdict: str = "unknown"
    probe_interval_seconds: int | None = None
    maintenance_until: dt.datetime | None = None  # set while (or until beat notes) it lasts


@dataclass
class FleetMetrics:
    now: dt.datetime
    hosts: list[HostRow]
    probe_window_seconds: int
    probe_outcomes: dict[tuple[int, str], int]  # (host id, status) -> snapshots in the window
    changes: dict[tuple[str, str], int]  # (kind, status) -> change requests, all time
    oldest_waiting: dt.datetime | None  # created_at of the oldest request waiting for approval
    verification: AuditVerification | None


def _seen(scope: Scope | None, field: str) -> Q:
    """The hosts a scrape covers: every host for the scraper (no scope), a person's own."""
    return Q() if scope is None else scope.host_q(field)


def hosts_with_latest_snapshot_lean(scope: Scope | None = None) -> list[HostRow]:
    """Every host (of `scope`) with its newest snapshot, in two queries, without the
    snapshots' raw output.

    Only the columns a scrape reads: at 500 hosts the raw command output would be megabytes per
    scrape. With each host's stored health verdict.
    """
    rows = list(
        Host.objects.filter(_seen(scope, "pk"))
        .annotate(latest_snapshot_id=newest_snapshot_id())
        .order_by("name")
        .values(
            "id",
            "name",
            "enabled",
            "host_key_status",
            "latest_snapshot_id",
            "health__verdict",
            "probe_interval_seconds",
            "maintenance_until",
        )
    )
    ids = [r["latest_snapshot_id"] for r in rows if r["latest_snapshot_id"]]
    snapshots = StateSnapshot.objects.only(*SNAPSHOT_FIELDS).in_bulk(ids)
    return [
        HostRow(
            id=r["id"],
            name=r["name"],
            enabled=r["enabled"],
            host_key_status=r["host_key_status"],
            snapshot=snapshots.get(r["latest_snapshot_id"]),
            verdict=r["health__verdict"] or "unknown",
            probe_interval_seconds=r["probe_interval_seconds"],
            maintenance_until=r["maintenance_until"],
        )
        for r in rows
    ]


def probe_outcomes_since(
    since: dt.datetime, scope: Scope | None = None
) -> dict[tuple[int, str], int]:
    """Snapshots per host and status taken since `since` (a range scan on taken_at's index)."""
    counts = (
        StateSnapshot.objects.filter(_seen(scope, "host_id"), taken_at__gte=since)
        .values("host_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {(row["host_id"], row["status"]): row["n"] for row in counts}


def change_counts(
    scope: Scope | None = None,
) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], Any]]:
    """Change requests by kind and status, with the oldest creation time of each group."""
    rows = (
        ChangeRequest.objects.filter(_seen(scope, "host_id"))
        .values("kind", "status")
        .annotate(n=Count("id"), oldest=Min("created_at"))
        .order_by()
    )
    counts: dict[tuple[str, str], int] = {}
    oldest: dict[tuple[str, str], Any] = {}
    for row in rows:
        counts[(row["kind"], row["status"])] = row["n"]
        oldest[(row["kind"], row["status"])] = row["oldest"]
    return counts, oldest


def fleet_metrics(now: dt.datetime | None = None, scope: Scope | None = None) -> FleetMetrics:
    """What one scrape shows: of every host for the scraper (no scope), of the hosts a
    person's `scope` sees when they are signed in (counts included)."""
    now = now or timezone.now()
    window = settings.METRICS_PROBE_WINDOW_SECONDS
    changes, oldest = change_counts(scope)
    pending = ChangeStatus.PENDING_APPROVAL
    waiting = [when for (_, status), when in oldest.items() if status == pending]
    return FleetMetrics(
        now=now,
        hosts=hosts_with_latest_snapshot_lean(scope),
        probe_window_seconds=window,
        probe_outcomes=probe_outcomes_since(now - dt.timedelta(seconds=window), scope),
        changes=changes,
        oldest_waiting=min(waiting) if waiting else None,
        verification=verification_latest(),
    )


def exposed_evaluations(scope: Scope | None = None) -> list[Evaluation]:
    """The newest finished coherence suite and benchmark of each deployment's current revision
    and of its previous one (the newest other revision that was written to the host), in one
    query: at most four rows per deployment, however long its history; of the hosts `scope`
    sees (every host for the scraper).

    Two revisions, so that after a swap the dashboard shows the new figures beside the ones
    they replaced, and after a rollback the figures that made it roll back.
    """
    previous = (
        DeploymentRevision.objects.filter(deployment=OuterRef("pk"), number__isnull=False)
        .exclude(pk=OuterRef("current_revision_id"))
        .order_by("-number")
        .values("pk")[:1]
    )
    shown = Q(pk__in=Deployment.objects.values("current_revision_id")) | Q(
        pk__in=Deployment.objects.annotate(previous=Subquery(previous)).values("previous")
    )
    revisions = DeploymentRevision.objects.filter(shown).annotate(
        suite=_newest_finished(EvaluationKind.COHERENCE),
        bench=_newest_finished(EvaluationKind.BENCHMARK),
    )
    return list(
        Evaluation.objects.filter(
            Q(pk__in=revisions.values("suite")) | Q(pk__in=revisions.values("bench")),
            _seen(scope, "deployment__host_id"),
        )
        .select_related("deployment__host", "revision__model", "profile")
        .defer("revision__unit_text", "deployment__host__presented_host_key")
        .order_by("deployment__host__name", "deployment__unit", "-revision__number", "kind")
    )


def _newest_finished(kind: str) -> Subquery:
    # Finished runs only: one still running (or cut off with its worker) has no figures yet.
    # The evaluation_latest index (revision, kind, started_at) answers it.
    return Subquery(
        Evaluation.objects.filter(revision=OuterRef("pk"), kind=kind, finished_at__isnull=False)
        .order_by("-started_at", "-pk")
        .values("pk")[:1]
    )


def change_activity(
    *, since: dt.datetime, limit: int, scope: Scope | None = None
) -> list[ChangeRequest]:
    """Changes with an event (requested, started, finished) since `since`, and every queued or
    running one however old, of the hosts `scope` sees (every host for the scraper), in one
    query: what the change annotations and the job gauges read.
    Queued and running ones first, so the limit never drops a job an alert watches.

    Each carries `approved_at` (its newest approval: when a change that needed one was
    queued), its host's lease and its revisions' models, but not the revisions' unit files.
    """
    active = Q(status__in=ACTIVE_JOB_STATUSES)
    recent = Q(created_at__gte=since) | Q(started_at__gte=since) | Q(finished_at__gte=since)
    approved_at = Subquery(
        Approval.objects.filter(change=OuterRef("pk"))
        .order_by("-created_at")
        .values("created_at")[:1]
    )
    return list(
        ChangeRequest.objects.filter(active | recent, _seen(scope, "host_id"))
        .select_related(
            "host__lease",
            "deployment__model",
            "from_revision__model",
            "target_revision__model",
        )
        .defer(
            "params",
            "drift_report",
            "reason",
            "status_reason",
            "from_revision__unit_text",
            "target_revision__unit_text",
            "host__presented_host_key",
        )
        .annotate(approved_at=approved_at)
        .order_by(Case(When(active, then=0), default=1), "-created_at", "-pk")[:limit]
    )


# The rollout columns the annotations read: not its reason, parameters or benchmark.
ROLLOUT_FIELDS = (
    "id", "kind", "status", "host_group_name", "created_at", "model", "model__name",
    "model__variant",
)  # fmt: skip


def rollouts_seen(scope: Scope | None = None) -> QuerySet[Rollout]:
    """The rollouts a scrape covers: every one for the scraper, and for a person those every
    host of which they see (deployments.rollouts.access.rollout_visible's rule, in SQL: no host
    of the rollout is outside their scope)."""
    rollouts = Rollout.objects.all()
    seen = _seen(scope, "host_id")
    if not seen:  # every host
        return rollouts
    hidden = RolloutHost.objects.filter(rollout=OuterRef("pk")).exclude(seen)
    return rollouts.filter(~Exists(hidden))


def rollout_counts(scope: Scope | None = None) -> dict[str, int]:
    """Rollouts by status, all time, of the scope."""
    rows = rollouts_seen(scope).values("status").annotate(n=Count("id")).order_by()
    return {row["status"]: row["n"] for row in rows}


def rollout_activity(
    *, since: dt.datetime, limit: int, scope: Scope | None = None
) -> list[Rollout]:
    """Rollouts with an event since `since`, and every one a worker still looks after however
    old, of the scope, at most `limit`, those still going first. Every event but a rollout's
    last happens while it is open, and the last sets finished_at, so its own times say whether
    it had one in the window."""
    active = Q(status__in=ACTIVE_ROLLOUT_STATUSES)
    recent = (
        Q(created_at__gte=since)
        | Q(started_at__gte=since)
        | Q(progress_at__gte=since)
        | Q(finished_at__gte=since)
    )
    return list(
        rollouts_seen(scope)
        .filter(active | recent)
        .select_related("model")
        .only(*ROLLOUT_FIELDS)
        .order_by(Case(When(active, then=0), default=1), "-created_at", "-pk")[:limit]
    )


def rollout_audit_events(rollouts: list[Rollout], actions: list[str]) -> list[AuditEvent]:
    """The audit events of `actions` about these rollouts, oldest first (the audit_target_seq
    index): when each thing happened is what the audit log recorded, in the same transaction."""
    if not rollouts:
        return []
    return list(
        AuditEvent.objects.filter(
            target_type="deployments.rollout",
            target_id__in=[str(rollout.pk) for rollout in rollouts],
            action__in=actions,
        )
        .only("seq", "created_at", "action", "target_id", "data")
        .order_by("seq")
    )
