"""Changes as Prometheus gauges: each recent change's events as timestamps (the dashboard's
annotations, monitoring.annotations) and each queued or running job's age (the alerts on a job
that is stuck).

Bounded: a change is exposed while one of its events is younger than
METRICS_CHANGE_WINDOW_SECONDS (or while it is queued or running), at most
METRICS_CHANGE_EVENTS_MAX changes, so the series follow the rate of changes, not their history.
Each series keeps its labels for as long as it is exposed: an event's outcome is known when it
happens, so nothing is relabelled while Prometheus watches it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from django.conf import settings
from prometheus_client.core import GaugeMetricFamily, Metric

from controlplane.accounts.roles import Scope
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest

from . import selectors

EVENT_LABELS = ["change", "host", "unit", "kind", "event", "outcome", "model", "from_model"]
JOB_LABELS = ["change", "host", "unit", "kind"]


def change_families(now: dt.datetime, scope: Scope | None = None) -> Iterator[Metric]:
    window = settings.METRICS_CHANGE_WINDOW_SECONDS
    changes = selectors.change_activity(
        since=now - dt.timedelta(seconds=window),
        limit=settings.METRICS_CHANGE_EVENTS_MAX,
        scope=scope,
    )
    events = GaugeMetricFamily(
        "controlplane_change_event_timestamp_seconds",
        "When a change was requested, started and finished (event), as Unix time, with its "
        "outcome once finished: the dashboard's change annotations, timed by the value. "
        "Exposed while one of the change's events is within "
        "controlplane_change_events_window_seconds.",
        labels=EVENT_LABELS,
    )
    running = GaugeMetricFamily(
        "controlplane_job_running_seconds",
        "How long each running change job has run.",
        labels=JOB_LABELS,
    )
    heartbeat = GaugeMetricFamily(
        "controlplane_job_heartbeat_age_seconds",
        "Seconds since each running job last renewed its host's lease (since it started, when it "
        "has not taken the lease). Recovery ends a job whose lease lapsed; one still running "
        "long after that means recovery is not running.",
        labels=JOB_LABELS,
    )
    queued = GaugeMetricFamily(
        "controlplane_job_queued_seconds",
        "How long each queued change has waited for a worker (since it was requested, or "
        "approved when it needed approval).",
        labels=JOB_LABELS,
    )
    for change in changes:
        _add_events(events, change)
        job = [str(change.pk), change.host.name, change.deployment.unit, change.kind]
        if change.status == ChangeStatus.RUNNING and change.started_at is not None:
            running.add_metric(job, (now - change.started_at).total_seconds())
            heartbeat.add_metric(job, (now - _last_heartbeat(change)).total_seconds())
        elif change.status == ChangeStatus.QUEUED:
            since = getattr(change, "approved_at", None) or change.created_at
            queued.add_metric(job, (now - since).total_seconds())
    span = GaugeMetricFamily(
        "controlplane_change_events_window_seconds",
        "How long after its last event a change stays in controlplane_change_event_timestamp_"
        "seconds (METRICS_CHANGE_WINDOW_SECONDS).",
    )
    span.add_metric([], float(window))
    yield from (events, span, running, heartbeat, queued)


def _add_events(family: GaugeMetricFamily, change: ChangeRequest) -> None:
    before = change.from_revision.model if change.from_revision is not None else None
    after = change.target_revision.model if change.target_revision is not None else None
    model = after or before or change.deployment.model
    common = [str(change.pk), change.host.name, change.deployment.unit, change.kind]
    models = [str(model), str(before) if before is not None else ""]
    for event, when, outcome in (
        ("requested", change.created_at, ""),
        ("started", change.started_at, ""),
        # A change that ended is finished whatever its status; an open one has no finish yet.
        ("finished", change.finished_at, change.status),
    ):
        if when is not None:
            family.add_metric([*common, event, outcome, *models], when.timestamp())


def _last_heartbeat(change: ChangeRequest) -> dt.datetime:
    # The lease row is the host's (one per host); it speaks for this job only while it holds it.
    lease = getattr(change.host, "lease", None)
    if lease is not None and lease.holder_id == change.pk and lease.heartbeat_at is not None:
        return lease.heartbeat_at
    return change.started_at or change.created_at
