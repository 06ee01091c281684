"""Raw output stored once per distinct content, and read back through `StateSnapshot.raw`."""

from __future__ import annotations

from typing import Any

import pytest

from hosts import services
from hosts.models import Host, SnapshotBlob, SnapshotBlobCorrupt, StateSnapshot
from hosts.probe import ProbeOutcome
from tests import factories as f
from tests.fleet import RegisteredFleet

pytestmark = pytest.mark.django_db


def raw(**outputs: str) -> dict[str, Any]:
    return {
        name: {"output": text, "exit_status": 0, "truncated": False}
        for name, text in outputs.items()
    }


def outcome(sections: dict[str, Any], **parsed_kwargs: Any) -> ProbeOutcome:
    return ProbeOutcome(
        status="ok", duration_ms=80, parsed=f.parsed_state(**parsed_kwargs), raw=sections
    )


def record(host: Host, sections: dict[str, Any], trigger: str = "schedule") -> StateSnapshot:
    return services.snapshot_record(
        host=host, outcome=outcome(sections), trigger=trigger, integrity=False
    )


def test_an_unchanged_section_is_stored_once_and_reads_back_whole() -> None:
    one, two = f.make_host("gpu-01"), f.make_host("gpu-02", port=2202)
    first = record(one, raw(compute_apps="0, 97199 MiB\n", version="580.82\n"))
    second = record(one, raw(compute_apps="0, 97311 MiB\n", version="580.82\n"))
    third = record(two, raw(compute_apps="0, 97199 MiB\n", version="580.82\n", empty=""))

    # two GPU readings (the other host's equals the first), one version, one empty output
    assert SnapshotBlob.objects.count() == 4
    assert first.raw_index["version"] == second.raw_index["version"] == third.raw_index["version"]
    assert (
        first.raw_index["compute_apps"]
        == third.raw_index["compute_apps"]
        != second.raw_index["compute_apps"]
    )
    stored = StateSnapshot.objects.get(pk=second.pk)
    assert stored.raw == raw(compute_apps="0, 97311 MiB\n", version="580.82\n")
    assert StateSnapshot.objects.get(pk=third.pk).raw["empty"] == {
        "output": "",
        "exit_status": 0,
        "truncated": False,
    }


def test_exit_status_and_truncation_are_part_of_the_content() -> None:
    host = f.make_host("gpu-01")
    ok = record(host, raw(health="ok"))
    failed = record(host, {"health": {"output": "ok", "exit_status": 7, "truncated": False}})
    cut = record(host, {"health": {"output": "ok", "exit_status": 0, "truncated": True}})
    assert len({ok.raw_index["health"], failed.raw_index["health"], cut.raw_index["health"]}) == 3
    assert StateSnapshot.objects.get(pk=failed.pk).raw["health"]["exit_status"] == 7
    assert StateSnapshot.objects.get(pk=cut.pk).raw["health"]["truncated"] is True


def test_a_changed_blob_is_refused_when_read() -> None:
    host = f.make_host("gpu-01")
    old_layout = SnapshotBlob.objects.create(
        sha256=SnapshotBlob.digest_of({"output": "0, 97199 MiB\n", "exit_status": 0}),
        output="0, 97199 MiB\n",
        exit_status=0,
    )
    snapshot = record(host, raw(compute_apps="0, 97199 MiB\n"))
    assert snapshot.raw_index["compute_apps"] == old_layout.pk  # found, not stored again
    SnapshotBlob.objects.filter(pk=old_layout.pk).update(output="0, 1 MiB\n")
    with pytest.raises(SnapshotBlobCorrupt):
        StateSnapshot.objects.get(pk=snapshot.pk).raw


def test_a_snapshot_without_raw_output_reads_as_empty() -> None:
    snapshot = f.make_snapshot(f.make_host("gpu-01"))
    assert StateSnapshot.objects.get(pk=snapshot.pk).raw == {}


def test_probes_over_ssh_store_only_the_sections_that_changed(
    registered_fleet: RegisteredFleet,
) -> None:
    hosts = [Host.objects.select_related("credential").get(pk=h.pk) for h in registered_fleet.hosts]
    first = services.hosts_probe(hosts=hosts, trigger="schedule", integrity=False)
    blobs_after_first = SnapshotBlob.objects.count()
    second = services.hosts_probe(hosts=hosts, trigger="schedule", integrity=False)

    new_blobs = SnapshotBlob.objects.count() - blobs_after_first
    sections = sum(len(s.raw_index) for s in second)
    assert all(s.status == "ok" for s in first + second)
    assert new_blobs < sections / 2, (new_blobs, sections)
    # sections every host prints alike (driver version, topology) are one row for the fleet
    assert first[0].raw_index["nvidia_smi_version"] == first[1].raw_index["nvidia_smi_version"]
    assert second[0].raw_index["gpu_topology"] == first[0].raw_index["gpu_topology"]
    # and every snapshot reads back exactly what its probe returned, through the one accessor
    for snapshot in second:
        stored = StateSnapshot.objects.get(pk=snapshot.pk).raw
        assert set(stored) == set(snapshot.raw_index)
        assert "MiB" in stored["gpus"]["output"]
        assert stored["gpus"]["exit_status"] == 0


def test_the_state_a_probe_hands_its_snapshot_is_what_the_database_gives_back(
    registered_fleet: RegisteredFleet,
) -> None:
    """The recorder gives each new snapshot the state its probe parsed (shared with the host's
    section memo) instead of reading `parsed` back: it must be exactly that reading, and
    nothing that runs on it (samples, fingerprints, verdicts, drift checks) may change it."""
    hosts = [Host.objects.select_related("credential").get(pk=h.pk) for h in registered_fleet.hosts]
    first = services.hosts_probe(hosts=hosts, trigger="schedule", integrity=True)
    registered_fleet.set_fault("gpu-01", "gpu_driver_error")
    second = services.hosts_probe(hosts=hosts, trigger="schedule", integrity=False)

    for snapshot in first + second:
        assert "_host_state" in snapshot.__dict__  # handed over, not read back
        assert snapshot.status in ("ok", "partial")
        stored = StateSnapshot.objects.get(pk=snapshot.pk)
        assert stored.state() == snapshot.state()
        assert stored.material_fingerprint() == snapshot.material_fingerprint()
    assert second[0].state() != first[0].state()  # the fault shows: the memo was not stale
    assert all(h.health.snapshot_id == s.pk for h, s in zip(hosts_reloaded(hosts), second))


def hosts_reloaded(hosts: list[Host]) -> list[Host]:
    return [Host.objects.select_related("health").get(pk=h.pk) for h in hosts]
