"""GPU samples keyed by (snapshot, GPU), and the migration that keys them (hosts 0013): every
sample kept with its readings, one per GPU a snapshot, and back again with its snapshot's time."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext

from hosts.models import GpuSample
from hosts.services.copy_rows import copy_rows
from tests import factories as f

BEFORE = ("hosts", "0012_verdict_order")
AFTER = ("hosts", "0013_gpusample_key_and_snapshot_host_index")
READINGS = ("memory_used_mib", "memory_total_mib", "power_draw_w", "utilization_pct")


def _rows(model) -> list[tuple]:
    return sorted(model.objects.values_list("snapshot_id", "gpu", "minute", *READINGS))


def _snapshot_host_indexes() -> set[str]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "hosts_statesnapshot")
    return {name for name, c in constraints.items() if c["index"] and c["columns"] == ["host_id"]}


def _assert_online(queries: list[dict]) -> None:
    """Probes keep writing while the migration runs: the key's index is built without a lock,
    and the one transaction that takes the table's lock gives up after a bounded wait."""
    sql = [q["sql"] for q in queries]
    build = next(i for i, s in enumerate(sql) if "gpusample_key ON" in s)
    assert sql[build].startswith("CREATE UNIQUE INDEX CONCURRENTLY")
    altered = [i for i, s in enumerate(sql) if s.startswith("ALTER TABLE hosts_gpusample")]
    timeout = next(i for i, s in enumerate(sql) if s.startswith("SET LOCAL lock_timeout"))
    assert build < timeout < min(altered)
    assert "DROP INDEX CONCURRENTLY IF EXISTS hosts_statesnapshot_host_id" in " ".join(sql)


@pytest.mark.django_db
def test_one_sample_per_gpu_a_snapshot():
    host = f.make_host("gpu-01")
    snapshot = f.make_snapshot(host, parsed={})
    values = {"host": host, "snapshot": snapshot, "minute": 1, "gpu": 3}
    GpuSample.objects.create(**values)
    with pytest.raises(IntegrityError), transaction.atomic():
        GpuSample.objects.create(**values)
    assert GpuSample.objects.get().pk == (snapshot.pk, 3)


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_every_sample_both_ways():
    host = f.make_host("gpu-01")
    snapshots = [f.make_snapshot(host, parsed=f.parsed_state(gpus=2), age=a) for a in (120, 60)]
    GpuSample.objects.bulk_create(
        GpuSample(
            host=host, snapshot=s, minute=GpuSample.minute_of(s.taken_at), gpu=g,
            memory_used_mib=1000 * g + 1, memory_total_mib=81559, power_draw_w=123.5 + g,
            utilization_pct=7 * g,
        )
        for s in snapshots
        for g in range(2)
    )  # fmt: skip
    kept = _rows(GpuSample)
    executor = MigrationExecutor(connection)
    try:
        executor.migrate([BEFORE])
        old = executor.loader.project_state([BEFORE]).apps.get_model("hosts", "GpuSample")
        assert _rows(old) == kept
        # back: each sample has an id again, and its snapshot's time to the microsecond
        times = {s.pk: s.taken_at for s in snapshots}
        assert all(row.taken_at == times[row.snapshot_id] for row in old.objects.all())
        assert len(set(old.objects.values_list("id", flat=True))) == 4
        assert _snapshot_host_indexes()

        executor = MigrationExecutor(connection)
        with CaptureQueriesContext(connection) as ran:
            executor.migrate([AFTER])
        assert _rows(GpuSample) == kept
        if connection.vendor == "postgresql":
            _assert_online(ran.captured_queries)
        assert not _snapshot_host_indexes()
        with pytest.raises(IntegrityError), transaction.atomic():
            GpuSample.objects.create(host=host, snapshot=snapshots[0], minute=1, gpu=0)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="workers of two versions: PostgreSQL")
def test_the_previous_versions_workers_still_store_samples():
    """While `migrate` runs, workers of the version before may still be probing: their COPY
    names `taken_at`, and their rows go in beside the new version's."""
    host = f.make_host("gpu-01")
    old, new = (f.make_snapshot(host, parsed={}, age=a) for a in (60, 0))
    previous_columns = ("host_id", "snapshot_id", "taken_at", "minute", "gpu")
    copy_rows(GpuSample, previous_columns, [(host.pk, old.pk, old.taken_at, 1, 0)])
    copy_rows(GpuSample, ("host_id", "snapshot_id", "minute", "gpu"), [(host.pk, new.pk, 2, 0)])
    assert _rows(GpuSample) == [
        (old.pk, 0, 1, None, None, None, None),
        (new.pk, 0, 2, None, None, None, None),
    ]
