"""Compressed raw output: the sections that change every probe packed in the snapshot, the rest
as compressed blobs, a dictionary trained on the fleet's own sections, and every byte read back
(or a refusal in words when stored bytes no longer match)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse

from hosts import packing, services
from hosts.models import (
    SectionDictionary,
    SnapshotBlob,
    SnapshotBlobCorrupt,
    StateSnapshot,
    section_dictionary,
)
from hosts.probe import ProbeOutcome
from hosts.services.blobs import dictionaries_collect, packed_section
from hosts.services.dictionaries import (
    DictionaryNotTrained,
    section_dictionary_train,
    section_dictionary_train_if_due,
)
from tests import factories as f

pytestmark = pytest.mark.django_db

GPUS = (
    "0, GPU-20dcbe10-65d5-0506-68ee-589f9b384aa4, NVIDIA RTX PRO 6000 Blackwell Server Edition, "
    "{used} MiB, 97887 MiB, {power:.2f} W, 600.00 W, {util} %, 43\n"
)
TOPOLOGY = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-63\nGPU1\tNV18\t X \t0-63\n"


def sections(i: int) -> dict[str, Any]:
    return {
        "gpus": {"output": GPUS.format(used=90000 + i, power=100 + i / 7, util=i % 100),
                 "exit_status": 0, "truncated": False},
        "processes": {"output": f"41003 vllm {i}:{i % 60:02d} python -m vllm\n",
                      "exit_status": 0, "truncated": False},
        "unit:vllm.service": {"output": f"ActiveState=active\nNRestarts={i}\nMainPID=41003\n",
                              "exit_status": 3, "truncated": False},
        "models:vllm.service": {"output": f'{{"data":[{{"id":"m","created":{1700000000 + i}}}]}}',
                                "exit_status": None, "truncated": True},
        "gpu_topology": {"output": TOPOLOGY, "exit_status": 0, "truncated": False},
        "compute_apps": {"output": f"41003, {i} MiB, ünïcode ✓\n", "exit_status": 0,
                         "truncated": False},
        "empty": {"output": "", "exit_status": 0, "truncated": False},
    }  # fmt: skip


def record(host, raw: dict[str, Any], trigger: str = "schedule") -> StateSnapshot:
    outcome = ProbeOutcome(status="ok", duration_ms=80, parsed=f.parsed_state(), raw=raw)
    return services.snapshot_record(host=host, outcome=outcome, trigger=trigger, integrity=False)


def fresh(snapshot: StateSnapshot) -> StateSnapshot:
    return StateSnapshot.objects.get(pk=snapshot.pk)


def trained_fleet(snapshots: int = 25) -> tuple[Any, SectionDictionary]:
    host = f.make_host("gpu-01")
    for i in range(snapshots):
        record(host, sections(i))
    return host, section_dictionary_train(size=4096)


def test_sections_that_change_every_probe_are_packed_in_the_snapshot_not_blobs() -> None:
    host = f.make_host("gpu-01")
    snapshot = record(host, sections(1))

    assert {name for name, pk in snapshot.raw_index.items() if pk == 0} == {
        "gpus", "processes", "unit:vllm.service", "models:vllm.service",
    }  # fmt: skip
    assert SnapshotBlob.objects.count() == 3  # topology, compute_apps, the empty output
    assert all(b.packed is not None and b.output == "" for b in SnapshotBlob.objects.all())
    stored = fresh(snapshot)
    # byte for byte, exit status (None too), truncation and order as the probe returned them
    assert stored.raw == sections(1)
    assert list(stored.raw) == list(stored.raw_index)  # as before: raw_index's order
    assert stored.raw_packed is not None and stored.dictionary_id is None  # none trained yet


def test_the_packed_list_names_sections_and_unit_prefixes() -> None:
    assert packed_section("gpus") and packed_section("unit:vllm-kimi.service")
    assert packed_section("models:a.service")
    assert not packed_section("gpus_extra") and not packed_section("unitcat:a.service")
    assert not packed_section("gpu_topology")


def test_a_trained_dictionary_compresses_what_is_stored_from_then_on() -> None:
    host, dictionary = trained_fleet()
    before = {b.pk for b in SnapshotBlob.objects.all()}

    snapshot = record(host, sections(500))

    assert snapshot.dictionary_id == dictionary.pk
    new = SnapshotBlob.objects.exclude(pk__in=before).get()  # only compute_apps is new
    assert new.dictionary_id == dictionary.pk
    assert fresh(snapshot).raw == sections(500)
    # smaller than zstd alone would make it, for the sections that change every probe
    plain = packing.pack_sections(list(sections(500).items())[:4], None)
    assert len(snapshot.raw_packed) < len(plain)


def test_a_blob_whose_content_no_longer_matches_its_digest_is_refused() -> None:
    host, dictionary = trained_fleet()
    snapshot = record(host, sections(501))
    blob = SnapshotBlob.objects.get(pk=snapshot.raw_index["compute_apps"])
    other = packing.record_of("", {"output": "41003, 1 GiB\n", "exit_status": 0})
    SnapshotBlob.objects.filter(pk=blob.pk).update(
        packed=packing.compress(other, section_dictionary(dictionary.pk))
    )

    with pytest.raises(SnapshotBlobCorrupt, match="does not match its SHA-256"):
        fresh(snapshot).raw


def test_cut_or_altered_stored_bytes_are_refused_in_words() -> None:
    host = f.make_host("gpu-01")
    snapshot = record(host, sections(2))
    packed = bytes(snapshot.raw_packed)

    with connection.cursor() as cursor:  # a snapshot is immutable to the ORM: as a disk would
        cursor.execute(
            "UPDATE hosts_statesnapshot SET raw_packed = %s WHERE id = %s",
            [packed[:-5], snapshot.pk],
        )
    with pytest.raises(SnapshotBlobCorrupt) as cut:
        fresh(snapshot).raw
    assert cut.value.http_status == 409
    assert "cannot be read back" in cut.value.message

    altered = packed[:32] + packing.compress(b"gpus\t0\t0\t3\nabc", None)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE hosts_statesnapshot SET raw_packed = %s WHERE id = %s", [altered, snapshot.pk]
        )
    with pytest.raises(SnapshotBlobCorrupt, match="SHA-256"):
        fresh(snapshot).raw

    blob = SnapshotBlob.objects.get(pk=snapshot.raw_index["gpu_topology"])
    SnapshotBlob.objects.filter(pk=blob.pk).update(packed=bytes(blob.packed)[:4])
    with pytest.raises(SnapshotBlobCorrupt, match=f"section blob {blob.pk}"):
        SnapshotBlob.objects.get(pk=blob.pk).as_section()


def test_the_snapshot_page_says_what_cannot_be_read_instead_of_failing(client, viewer) -> None:
    host = f.make_host("gpu-01")
    snapshot = record(host, sections(3))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE hosts_statesnapshot SET raw_packed = %s WHERE id = %s",
            [bytes(snapshot.raw_packed)[:40], snapshot.pk],
        )
    client.force_login(viewer)

    page = client.get(reverse("hosts:snapshot", args=[snapshot.pk]))
    api = client.get(f"/api/v1/snapshots/{snapshot.pk}/")

    assert page.status_code == 409
    assert "cannot be read back" in page.content.decode()
    assert api.status_code == 409
    assert "cannot be read back" in api.content.decode()


def test_training_refuses_without_enough_sections_and_says_so() -> None:
    record(f.make_host("gpu-01"), sections(1))
    with pytest.raises(DictionaryNotTrained, match="probe the fleet for longer"):
        section_dictionary_train()
    with pytest.raises(CommandError, match="probe the fleet for longer"):
        call_command("train_section_dictionary")


def test_the_command_trains_and_stores_a_dictionary(capsys) -> None:
    host = f.make_host("gpu-01")
    for i in range(25):
        record(host, sections(i))
    call_command("train_section_dictionary", "--size", "4096")
    made = SectionDictionary.objects.get()
    assert made.sha256 == hashlib.sha256(bytes(made.content)).hexdigest()
    assert f"section dictionary {made.pk}" in capsys.readouterr().out


def test_a_dictionary_goes_only_when_nothing_needs_it_and_a_newer_one_exists() -> None:
    host, first = trained_fleet()
    assert dictionaries_collect() == 0  # the newest always stays
    snapshot = record(host, sections(600))  # packed with `first`, and a compute_apps blob
    blob = SnapshotBlob.objects.get(pk=snapshot.raw_index["compute_apps"])
    assert snapshot.dictionary_id == blob.dictionary_id == first.pk
    SectionDictionary.objects.create(content=b"newer", sha256="2" * 64, samples=1, sample_bytes=1)

    assert dictionaries_collect() == 0  # the snapshot and the blob need it

    StateSnapshot.objects.filter(pk=snapshot.pk).delete()
    assert dictionaries_collect() == 0  # the blob still needs it
    assert SnapshotBlob.objects.get(pk=blob.pk).as_section() == sections(600)["compute_apps"]

    SnapshotBlob.objects.filter(pk=blob.pk).delete()
    assert dictionaries_collect() == 1
    assert not SectionDictionary.objects.filter(pk=first.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_retention_leaves_a_dictionary_that_a_round_in_flight_holds() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks: PostgreSQL")
    import psycopg

    older = SectionDictionary.objects.create(
        content=b"a", sha256="1" * 64, samples=1, sample_bytes=1
    )
    SectionDictionary.objects.create(content=b"b", sha256="2" * 64, samples=1, sample_bytes=1)
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"], port=settings["PORT"] or 5432, user=settings["USER"],
        dbname=settings["NAME"], password=settings["PASSWORD"] or None,
    ) as other:  # fmt: skip
        # what a round does with the dictionary it compresses with, until it commits
        other.execute(
            "SELECT id FROM hosts_sectiondictionary WHERE id = %s FOR KEY SHARE", [older.pk]
        )
        assert dictionaries_collect() == 0
        other.rollback()
    assert dictionaries_collect() == 1


def test_beat_trains_the_first_dictionary_once_there_is_enough_and_again_once_it_is_old() -> None:
    import datetime as dt

    from django.utils import timezone

    from hosts import tasks

    host = f.make_host("gpu-01")
    record(host, sections(0))
    assert tasks.train_section_dictionary() is None  # too little to train on: plain zstd
    assert not SectionDictionary.objects.exists()
    for i in range(1, 25):
        record(host, sections(i))
    first = section_dictionary_train_if_due(3600, size=4096)
    assert first is not None
    assert section_dictionary_train_if_due(3600, size=4096) is None  # the newest is recent
    SectionDictionary.objects.update(created_at=timezone.now() - dt.timedelta(hours=2))
    for i in range(25, 40):
        record(host, sections(i))
    second = section_dictionary_train_if_due(3600, size=4096)
    assert second is not None and second.pk != first.pk
    assert fresh(record(host, sections(41))).dictionary_id == second.pk
