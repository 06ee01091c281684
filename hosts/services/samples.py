"""GPU samples: each ok/partial snapshot's per-GPU readings as rows the charts can GROUP BY."""

from __future__ import annotations

import math
from collections.abc import Iterable

from django.db import connection, transaction
from django.db.models import Exists, OuterRef

from ..choices import SnapshotStatus
from ..models import GpuSample, StateSnapshot
from .copy_rows import copy_rows

# Only these hold readings; an error or key-mismatch snapshot has no GPUs to chart.
SAMPLED_STATUSES = (SnapshotStatus.OK, SnapshotStatus.PARTIAL)
BACKFILL_BATCH = 500  # snapshots per transaction: a few thousand rows, a short lock
SMALLINT, INT = 32767, 2147483647


def _reading(value: object, low: float, high: float) -> float | None:
    """A number the column can hold, else None: samples are derived data, and an odd reading
    must not fail the probe's transaction (and lose its snapshot) on a range check."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value if low <= value <= high else None


_COPY_COLUMNS = (
    "host_id", "snapshot_id", "minute", "gpu", "memory_used_mib",
    "memory_total_mib", "power_draw_w", "utilization_pct", "temperature_c",
)  # fmt: skip


def gpu_sample_rows(snapshots: Iterable[StateSnapshot]) -> list[tuple[object, ...]]:
    """One row (the values of _COPY_COLUMNS) per GPU of every stored ok/partial snapshot."""
    rows: list[tuple[object, ...]] = []
    for snapshot in snapshots:
        if snapshot.status not in SAMPLED_STATUSES:
            continue
        host_id, snapshot_id = snapshot.host_id, snapshot.pk
        minute = GpuSample.minute_of(snapshot.taken_at)
        seen: set[int] = set()
        for gpu in snapshot.state().gpus:
            index = _reading(gpu.index, 0, SMALLINT)
            # (snapshot, gpu) is unique: a repeated or missing index is skipped, not fatal
            if index is None or int(index) in seen:
                continue
            seen.add(int(index))
            rows.append((
                host_id, snapshot_id, minute, int(index),
                _reading(gpu.memory_used_mib, 0, INT),
                _reading(gpu.memory_total_mib, 0, INT),
                _reading(gpu.power_draw_w, -math.inf, math.inf),
                _reading(gpu.utilization_pct, 0, SMALLINT),
                _reading(gpu.temperature_c, -SMALLINT, SMALLINT),
            ))  # fmt: skip
    return rows


def gpu_samples_for(snapshots: Iterable[StateSnapshot]) -> list[GpuSample]:
    """One unsaved row per GPU of every stored ok/partial snapshot."""
    return [
        GpuSample(**dict(zip(_COPY_COLUMNS, row, strict=True)))
        for row in gpu_sample_rows(snapshots)
    ]


def gpu_samples_record(*, snapshots: Iterable[StateSnapshot]) -> int:
    """Store the samples of snapshots just stored; called inside the snapshots' transaction.

    On PostgreSQL the rows go in with COPY: a probe round writes eight per host, and building
    an INSERT of thousands of rows cost more of the worker's CPU than any other statement.
    """
    if connection.vendor != "postgresql":
        samples = gpu_samples_for(snapshots)
        GpuSample.objects.bulk_create(samples)
        return len(samples)
    rows = gpu_sample_rows(snapshots)  # no model instances: eight a probe cost more than COPY
    if not rows:
        return 0
    copy_rows(GpuSample, _COPY_COLUMNS, rows)
    return len(rows)


def gpu_samples_backfill(*, batch_size: int = BACKFILL_BATCH) -> tuple[int, int]:
    """Samples for ok/partial snapshots stored before samples existed: (snapshots, samples).

    Idempotent: a snapshot with samples is skipped, and (snapshot, gpu) is unique, so a run that
    overlaps the probe path or another run inserts nothing twice. Walks by id (keyset) so each
    batch is one short transaction and a snapshot without GPUs is not fetched again.
    """
    has_samples = GpuSample.objects.filter(snapshot=OuterRef("pk"))
    pending = (
        StateSnapshot.objects.filter(status__in=SAMPLED_STATUSES)
        .exclude(Exists(has_samples))
        .only("id", "host_id", "taken_at", "status", "parsed")
        .order_by("id")
    )
    after, snapshots_done, samples_done = 0, 0, 0
    while True:
        batch = list(pending.filter(id__gt=after)[:batch_size])
        if not batch:
            return snapshots_done, samples_done
        samples = gpu_samples_for(batch)
        with transaction.atomic():
            GpuSample.objects.bulk_create(samples, ignore_conflicts=True)
        after = batch[-1].pk
        snapshots_done += len(batch)
        samples_done += len(samples)
