"""The large, rarely changing parts of `parsed` are stored packed; every read gives `parsed`
back whole and in the same order as a snapshot stored whole, and what SQL reads by key path
stays plain JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from hosts import services
from hosts.models import (
    PARSED_PACKED_KEYS,
    PARSED_PACKED_MARK,
    SnapshotBlobCorrupt,
    StateSnapshot,
)
from hosts.probe import ProbeOutcome
from hosts.selectors import ROW_STATE_KEYS
from hosts.state import HostState, snapshot_digest
from tests import factories as f

pytestmark = pytest.mark.django_db


def full_parsed() -> dict[str, Any]:
    parsed = f.parsed_state()
    parsed["topology"] = {"gpus": ["GPU0", "GPU1"], "links": {"GPU0": {"GPU1": "NV18"}}}
    parsed["gpu_details"] = [{"index": 0, "serial": "1652", "persistence_mode": "Enabled"}]
    parsed["gpu_errors"] = [{"index": 0, "ecc_volatile_uncorrected": 0, "zeta": 1, "a": 2}]
    parsed["compute_apps"] = [{"pid": 41003, "gpu_uuid": "GPU-1", "used_memory_mib": 90000}]
    return parsed


def probed(host, parsed: dict[str, Any]) -> StateSnapshot:
    outcome = ProbeOutcome(
        status="ok",
        duration_ms=80,
        parsed=parsed,
        raw={"gpus": {"output": "0, 1 MiB\n", "exit_status": 0, "truncated": False}},
    )
    return services.snapshot_record(host=host, outcome=outcome, trigger="manual", integrity=False)


def stored_whole(host, parsed: dict[str, Any]) -> StateSnapshot:
    """A snapshot stored as before packing: `parsed` whole in its JSON column."""
    return StateSnapshot.objects.create(
        host=host, taken_at=timezone.now(), status="ok", trigger="manual", duration_ms=80,
        parsed=parsed, digest=snapshot_digest(parsed),
    )  # fmt: skip


def test_parsed_reads_back_whole_and_in_the_same_order_as_a_snapshot_stored_whole() -> None:
    host = f.make_host("gpu-01")
    packed, whole = probed(host, full_parsed()), stored_whole(host, full_parsed())

    as_stored = StateSnapshot.objects.filter(pk=packed.pk).values_list("parsed", flat=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT parsed FROM hosts_statesnapshot WHERE id = %s", [packed.pk])
        (column,) = cursor.fetchone()
    column = json.loads(column) if isinstance(column, str) else column
    assert PARSED_PACKED_MARK in column and not set(PARSED_PACKED_KEYS) & set(column)

    read_packed = StateSnapshot.objects.get(pk=packed.pk).parsed
    read_whole = StateSnapshot.objects.get(pk=whole.pk).parsed
    assert read_packed == full_parsed() == read_whole
    assert json.dumps(read_packed) == json.dumps(read_whole)  # key order too
    assert json.dumps(as_stored.get()) == json.dumps(read_whole)  # values_list as well
    assert packed.parsed == full_parsed()  # the instance the probe path goes on with
    assert StateSnapshot.objects.get(pk=packed.pk).state() == HostState.from_json(full_parsed())
    assert snapshot_digest(read_packed) == packed.digest


def test_what_sql_reads_by_key_path_stays_plain_json() -> None:
    # the fleet rows, probe specs and verdicts read these with JSON key paths in SQL
    assert not set(PARSED_PACKED_KEYS) & {*ROW_STATE_KEYS, "deployments"}
    host = f.make_host("gpu-01")
    packed, whole = probed(host, full_parsed()), stored_whole(host, full_parsed())
    for key in ROW_STATE_KEYS:
        values = dict(
            StateSnapshot.objects.filter(pk__in=[packed.pk, whole.pk]).values_list(
                "pk", f"parsed__{key}"
            )
        )
        assert values[packed.pk] == values[whole.pk] == full_parsed()[key]


def test_the_api_and_the_page_show_the_same_state(client, viewer) -> None:
    host = f.make_host("gpu-01")
    packed, whole = probed(host, full_parsed()), stored_whole(host, full_parsed())
    client.force_login(viewer)

    def api(pk: int) -> dict[str, Any]:
        body = client.get(f"/api/v1/snapshots/{pk}/").json()
        return body["parsed"]

    assert json.dumps(api(packed.pk)) == json.dumps(api(whole.pk))
    page = client.get(reverse("hosts:snapshot", args=[packed.pk])).content.decode()
    assert "1652" in page  # a GPU's serial, from the packed details


def test_packed_parts_that_do_not_read_back_are_refused_in_words(client, viewer) -> None:
    host = f.make_host("gpu-01")
    snapshot = probed(host, full_parsed())
    with connection.cursor() as cursor:  # immutable to the ORM: as a disk would
        cursor.execute("SELECT parsed FROM hosts_statesnapshot WHERE id = %s", [snapshot.pk])
        (column,) = cursor.fetchone()
        column = json.loads(column) if isinstance(column, str) else column
        dictionary_id, text = column[PARSED_PACKED_MARK]
        column[PARSED_PACKED_MARK] = [dictionary_id, text[:-8]]
        cursor.execute(
            "UPDATE hosts_statesnapshot SET parsed = %s WHERE id = %s",
            [json.dumps(column), snapshot.pk],
        )

    with pytest.raises(SnapshotBlobCorrupt, match="parsed state stored with this snapshot"):
        StateSnapshot.objects.get(pk=snapshot.pk)
    client.force_login(viewer)
    page = client.get(reverse("hosts:snapshot", args=[snapshot.pk]))
    assert page.status_code == 409
    assert "cannot be read back" in page.content.decode()


def test_a_snapshot_without_the_large_parts_is_stored_as_it_is() -> None:
    host = f.make_host("gpu-01")
    parsed = {"problems": [{"section": "ssh", "message": "refused"}]}
    snapshot = probed(host, parsed)
    assert StateSnapshot.objects.get(pk=snapshot.pk).parsed == parsed
