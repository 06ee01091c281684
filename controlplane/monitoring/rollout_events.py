"""Rollouts as Prometheus gauges: each recent rollout's events as timestamps (the dashboard's
rollout annotations, monitoring.annotations), rollouts by status, and those waiting for
approval.

The events are the rollout's own audit events (deployments.rollouts writes each in the
transaction of what it records), read for the rollouts a scrape exposes: those with an event
within METRICS_CHANGE_WINDOW_SECONDS (the change annotations' window, so both leave the
dashboard together) and every one a worker still looks after, at most METRICS_ROLLOUT_EVENTS_MAX
rollouts, those still going first. Each series keeps its labels for as long as it is exposed:
`status` is the one the event moved the rollout to (or left it in), never its status now.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from django.conf import settings
from prometheus_client.core import GaugeMetricFamily, Metric

from controlplane.accounts.roles import Scope
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from deployments.models import Rollout
from deployments.rollouts.choices import RolloutStatus
from deployments.rollouts.waves import wave_label

from . import selectors

EVENT_LABELS = ["rollout", "kind", "event", "status", "wave", "host_group", "model"]

A, R = AuditAction, RolloutStatus
# Each audit action drawn, as (event, the rollout's status it leaves): every final status is an
# `ended` event, so one query finds every end; a halted rollout also says its wave rolled back.
EVENTS: dict[str, tuple[tuple[str, str], ...]] = {
    A.ROLLOUT_REQUESTED: (("requested", R.PENDING_APPROVAL),),
    A.ROLLOUT_APPROVED: (("approved", R.APPROVED),),
    A.ROLLOUT_WAVE_STARTED: (("wave_started", R.RUNNING),),
    A.ROLLOUT_WAVE_PASSED: (("wave_passed", R.RUNNING),),
    A.ROLLOUT_HALTED: (("halted", R.HALTING),),
    A.ROLLOUT_ROLLED_BACK: (("rolled_back", R.HALTED), ("ended", R.HALTED)),
    A.ROLLOUT_REJECTED: (("ended", R.REJECTED),),
    A.ROLLOUT_SUCCEEDED: (("ended", R.SUCCEEDED),),
    A.ROLLOUT_ABORTED: (("ended", R.ABORTED),),
    A.ROLLOUT_FAILED: (("ended", R.FAILED),),
}
# The events that name a wave (in their audit data).
WAVE_EVENTS = frozenset({"wave_started", "wave_passed", "halted", "rolled_back"})


def rollout_families(now: dt.datetime, scope: Scope | None = None) -> Iterator[Metric]:
    window = settings.METRICS_CHANGE_WINDOW_SECONDS
    rollouts = selectors.rollout_activity(
        since=now - dt.timedelta(seconds=window),
        limit=settings.METRICS_ROLLOUT_EVENTS_MAX,
        scope=scope,
    )
    events = GaugeMetricFamily(
        "controlplane_rollout_event_timestamp_seconds",
        "When a rollout was requested, approved, each wave started and passed, it halted, its "
        "wave was rolled back, and it ended (event), as Unix time, with the status the event "
        "left it in: the dashboard's rollout annotations, timed by the value. Exposed while one "
        "of the rollout's events is within controlplane_change_events_window_seconds.",
        labels=EVENT_LABELS,
    )
    by_rollout = {str(rollout.pk): rollout for rollout in rollouts}
    samples: dict[tuple[str, ...], float] = {}
    for event in selectors.rollout_audit_events(rollouts, list(EVENTS)):
        rollout = by_rollout[event.target_id]
        for labels in _labels(rollout, event):
            # Oldest first: a wave started again (a skipped canary replaced) moves its time on.
            samples[labels] = event.created_at.timestamp()
    for labels, when in samples.items():
        events.add_metric(list(labels), when)
    yield events
    yield from _status_families(selectors.rollout_counts(scope))


def _labels(rollout: Rollout, event: AuditEvent) -> Iterator[tuple[str, ...]]:
    data = event.data or {}
    wave = data.get("wave")
    model = str(rollout.model) if rollout.model_id is not None else ""
    for name, status in EVENTS[event.action]:
        shown = wave_label(wave) if name in WAVE_EVENTS and isinstance(wave, int) else ""
        yield (
            str(rollout.pk), rollout.kind, name, status, shown, rollout.host_group_name, model,
        )  # fmt: skip


def _status_families(counts: dict[str, int]) -> Iterator[Metric]:
    # Every status is present, zeros included, so increase() and alerts see the first halt as a
    # change from 0 rather than as a new series.
    by_status = GaugeMetricFamily(
        "controlplane_rollouts",
        "Rollouts by current status, all time. Final statuses only grow.",
        labels=["status"],
    )
    for status in RolloutStatus.values:
        by_status.add_metric([status], float(counts.get(status, 0)))
    waiting = GaugeMetricFamily(
        "controlplane_rollouts_waiting_approval",
        "Rollouts waiting for a second person's approval.",
    )
    waiting.add_metric([], float(counts.get(RolloutStatus.PENDING_APPROVAL, 0)))
    yield from (by_status, waiting)
