"""Snapshot retention: every snapshot for a day, then fewer by age, and every one that anything
names for ever.

With the defaults (settings SNAPSHOT_*): every snapshot younger than 24 h; one per host per 10
minutes up to 30 days; one per host per hour after that. In each bucket the earliest snapshot
stays, so the hourly one is always one of the ten-minute ones, and thinning again changes
nothing. Kept whatever their age: every snapshot that a row of another table names (change
requests, approvals, a host's health, whatever a later app adds: found through the model's
relations, not by name) and every snapshot an audit event names, which includes each
scheduled probe whose status, material state or verdict changed
(hosts.services.probe_recording). A snapshot's GPU samples and its packed sections go with it;
the raw output blobs it alone named go after it, and then the compression dictionaries nothing
needs any more (never the newest).

Progress is kept per tier in SnapshotRetention, so each run reads only the windows that aged
into a tier since the last one. `snapshots_thin` is what beat runs (SNAPSHOT_RETENTION_SWEEP_
SECONDS) and what `manage.py thin_snapshots` runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import ForeignObjectRel
from django.utils import timezone

from controlplane.audit.models import AuditEvent

from ..models import GpuSample, SnapshotRetention, StateSnapshot
from .blobs import blob_ids, blobs_collect, dictionaries_collect

SQL_BATCH = 1000  # ids per statement


@dataclass
class RetentionResult:
    examined: int = 0
    removed: int = 0
    kept_referenced: int = 0
    blobs_removed: int = 0
    dictionaries_removed: int = 0
    windows: int = 0
    finished: bool = True
    tiers: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        return (
            f"examined {self.examined} snapshots in {self.windows} windows, removed "
            f"{self.removed}, kept {self.kept_referenced} more that are referenced, removed "
            f"{self.blobs_removed} raw output blobs no snapshot names"
            + (
                f", and {self.dictionaries_removed} compression dictionaries nothing needs"
                if self.dictionaries_removed
                else ""
            )
            + ("" if self.finished else " (time budget reached: the next run goes on)")
        )


def _floor(moment: datetime, seconds: int) -> datetime:
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, tz=UTC)


def _references() -> list[tuple[type[models.Model], str]]:
    """(model, column) of every relation that names a snapshot and does not go with it."""
    refs = []
    # include_hidden: most of them are `related_name="+"`, which related_objects leaves out
    for rel in StateSnapshot._meta.get_fields(include_hidden=True):
        if not isinstance(rel, ForeignObjectRel):
            continue
        if rel.on_delete is models.CASCADE:  # derived rows (GpuSample) are removed with it
            continue
        model = rel.related_model
        assert isinstance(model, type)
        refs.append((model, rel.field.attname))
    return refs


def snapshots_referenced(ids: list[int]) -> set[int]:
    """Which of `ids` a row elsewhere or an audit event names."""
    named: set[int] = set()
    refs = _references()
    for start in range(0, len(ids), SQL_BATCH):
        chunk = ids[start : start + SQL_BATCH]
        for model, column in refs:
            named.update(
                model._default_manager.filter(**{f"{column}__in": chunk}).values_list(
                    column, flat=True
                )
            )
        events = AuditEvent.objects.filter(snapshot_id__in=chunk)
        named.update(pk for pk in events.values_list("snapshot_id", flat=True) if pk is not None)
    return named


def _thin_window(start: datetime, end: datetime, bucket: int, result: RetentionResult) -> bool:
    """Keep the earliest snapshot per host per `bucket` seconds in [start, end), and every
    referenced one; remove the rest. False when the window held no snapshot at all."""
    rows = list(
        StateSnapshot.objects.filter(taken_at__gte=start, taken_at__lt=end)
        .order_by("host_id", "taken_at", "id")
        .values_list("id", "host_id", "taken_at", "raw_index")
    )
    if not rows:
        return False
    result.examined += len(rows)
    seen: set[tuple[int, int]] = set()
    doomed: list[int] = []
    kept_blobs: set[int] = set()
    doomed_blobs: dict[int, set[int]] = {}
    for pk, host_id, taken_at, index in rows:
        slot = (host_id, int(taken_at.timestamp()) // bucket)
        if slot in seen:
            doomed.append(pk)
            doomed_blobs[pk] = blob_ids(index or {})
        else:
            seen.add(slot)
            kept_blobs |= blob_ids(index or {})
    if not doomed:
        return True
    referenced = snapshots_referenced(doomed)
    result.kept_referenced += len(referenced)
    removed = [pk for pk in doomed if pk not in referenced]
    for pk in referenced:
        kept_blobs |= doomed_blobs.pop(pk, set())
    with transaction.atomic():
        for chunk_start in range(0, len(removed), SQL_BATCH):
            chunk = removed[chunk_start : chunk_start + SQL_BATCH]
            GpuSample.objects.filter(snapshot_id__in=chunk).delete()
            _delete_snapshots(chunk)
    result.removed += len(removed)
    candidates = set().union(*doomed_blobs.values()) - kept_blobs if doomed_blobs else set()
    result.blobs_removed += blobs_collect(candidates)
    return True


def _delete_snapshots(ids: list[int]) -> None:
    """Plain DELETE: the rows have no dependents left (checked just before); the database's
    own foreign keys still refuse the commit if one appeared since."""
    placeholders = ", ".join(["%s"] * len(ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM hosts_statesnapshot WHERE id IN ({placeholders})",  # noqa: S608
            ids,
        )


def _tier(
    name: str,
    mark: datetime | None,
    until: datetime,
    bucket: int,
    deadline: float | None,
    result: RetentionResult,
) -> datetime | None:
    """Thin [mark, until) window by window; returns how far it got (None: nothing to do)."""
    if mark is None:
        oldest = StateSnapshot.objects.order_by("taken_at").values_list("taken_at", flat=True)
        first = oldest.first()
        if first is None:
            return None
        mark = _floor(first, bucket)
    window = timedelta(seconds=max(bucket, 600))
    position = mark
    while position < until:
        if deadline is not None and time.monotonic() > deadline:
            result.finished = False
            break
        end = min(position + window, until)
        result.windows += 1
        if not _thin_window(position, end, bucket, result):
            # a gap (nothing probed): skip to the bucket of the next snapshot
            later = StateSnapshot.objects.filter(taken_at__gte=end).order_by("taken_at")
            following = later.values_list("taken_at", flat=True).first()
            if following is None or following >= until:
                position = until
                break
            end = max(end, _floor(following, bucket))
        position = end
    result.tiers[name] = position.isoformat()
    return position


def snapshots_thin(
    *, now: datetime | None = None, time_budget: float | None = None
) -> RetentionResult:
    """Thin what aged into each tier since the last run. With `time_budget` (seconds), stop
    after the window that crosses it; progress is saved and the next run goes on from there."""
    now = now or timezone.now()
    deadline = time.monotonic() + time_budget if time_budget is not None else None
    dense = settings.SNAPSHOT_DENSE_EVERY_SECONDS
    sparse = settings.SNAPSHOT_SPARSE_EVERY_SECONDS
    dense_until = _floor(now - timedelta(seconds=settings.SNAPSHOT_KEEP_ALL_SECONDS), dense)
    sparse_until = _floor(now - timedelta(seconds=settings.SNAPSHOT_KEEP_DENSE_SECONDS), sparse)
    marks, _ = SnapshotRetention.objects.get_or_create(pk=1)
    result = RetentionResult()
    # The older tier first: a fresh database with old history is thinned to the sparse rate
    # at once, without thinning it to the dense rate on the way.
    reached = _tier("sparse", marks.sparse_until, sparse_until, sparse, deadline, result)
    if reached is not None:
        marks.sparse_until = reached
    dense_from = marks.dense_until
    if dense_from is None or (reached is not None and dense_from < reached):
        dense_from = reached
    reached = _tier("dense", dense_from, dense_until, dense, deadline, result)
    if reached is not None:
        marks.dense_until = reached
    marks.save()
    # after the blobs: a dictionary goes only once nothing compressed with it is left
    result.dictionaries_removed = dictionaries_collect()
    return result


def retention_settings() -> dict[str, Any]:
    return {
        "keep_all_seconds": settings.SNAPSHOT_KEEP_ALL_SECONDS,
        "dense_every_seconds": settings.SNAPSHOT_DENSE_EVERY_SECONDS,
        "keep_dense_seconds": settings.SNAPSHOT_KEEP_DENSE_SECONDS,
        "sparse_every_seconds": settings.SNAPSHOT_SPARSE_EVERY_SECONDS,
    }
