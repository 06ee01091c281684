"""Which hosts are due for a scheduled probe, claimed so that two sweeps never take the same one.

A claim does not mark a host probed: `last_probe_at` moves only when its snapshot is stored
(hosts.services.probe_recording), so a host whose batch was lost stays the most overdue.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from ..models import Host


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
