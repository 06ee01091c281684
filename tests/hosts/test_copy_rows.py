"""Snapshots stored through COPY (hosts.services.copy_rows, PostgreSQL's probe path) are stored
exactly as bulk_create stores them, and each object comes back saved with its own row's id."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection

from hosts.models import SnapshotImmutable, StateSnapshot
from hosts.services.copy_rows import copy_create
from tests import factories as f

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="COPY is PostgreSQL's"),
]


def _snapshots(hosts: list[Any], taken_at: dt.datetime) -> list[StateSnapshot]:
    return [
        StateSnapshot(
            host=host,
            taken_at=taken_at,
            status=status,
            trigger="schedule",
            duration_ms=70 + i,
            raw_index={"gpus": 0, "clock": i + 1},
            raw_packed=None if i % 2 else b"\x00\x01packed\\\n\t",
            parsed=f.parsed_state(model=f"model-{i}") | {"note": "tab\there\nnew'line\\"},
            digest=f"{i:064x}",
            error="" if status == "ok" else "ssh: connect timed out\n\\N",
            includes_integrity=bool(i % 2),
            correlation_id=f"corr-{i}",
        )
        for i, (host, status) in enumerate(zip(hosts, ["ok", "unreachable", "ok"], strict=True))
    ]


def _stored(snapshots: list[StateSnapshot]) -> list[dict[str, Any]]:
    rows = StateSnapshot.objects.filter(pk__in=[s.pk for s in snapshots]).order_by("id").values()
    return [{k: v for k, v in row.items() if k != "id"} for row in rows]


def test_copy_create_stores_what_bulk_create_stores() -> None:
    hosts = [f.make_host(f"gpu-0{i}", port=2200 + i) for i in range(3)]
    taken_at = dt.datetime(2026, 12, 5, 18, 0, tzinfo=dt.UTC)
    by_insert = _snapshots(hosts, taken_at)
    StateSnapshot.objects.bulk_create(by_insert)
    by_copy = _snapshots(hosts, taken_at)
    copy_create(by_copy)

    assert _stored(by_copy) == _stored(by_insert)
    assert _stored(by_copy)[0]["raw_packed"] == b"\x00\x01packed\\\n\t"


def test_each_object_is_saved_with_its_own_rows_id_in_order() -> None:
    hosts = [f.make_host(f"gpu-0{i}", port=2200 + i) for i in range(3)]
    snapshots = _snapshots(hosts, dt.datetime(2026, 12, 5, 18, 0, tzinfo=dt.UTC))
    copy_create(snapshots)

    ids = [s.pk for s in snapshots]
    assert ids == sorted(ids) and len(set(ids)) == 3
    for snapshot in snapshots:
        row = StateSnapshot.objects.get(pk=snapshot.pk)
        assert (row.host_id, row.digest, row.duration_ms) == (
            snapshot.host_id,
            snapshot.digest,
            snapshot.duration_ms,
        )
    with pytest.raises(SnapshotImmutable):  # saved: a second save would change a snapshot
        snapshots[0].save()
    # the sequence moved past them: the next snapshot stored the usual way takes a new id
    later = StateSnapshot.objects.bulk_create(_snapshots(hosts, snapshots[0].taken_at))
    assert min(s.pk for s in later) > max(ids)
