"""Snapshot retention: fewer snapshots by age, never one that something names, and the raw
output blobs that only removed snapshots named go too."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.core.management import call_command

from controlplane.audit.models import AuditEvent
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest
from hosts import services
from hosts.models import GpuSample, Host, HostHealth, SnapshotBlob, StateSnapshot
from hosts.probe import ProbeOutcome
from hosts.services.retention import snapshots_thin
from tests import factories as f

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 1, 5, 0, 0, tzinfo=dt.UTC)  # on the hour


def probe_at(host: Host, minute: float, *, trigger: str = "schedule", pid: int = 41003) -> int:
    sections = {
        "gpus": {"output": f"0, {97000 + int(minute * 10)} MiB\n", "exit_status": 0,
                 "truncated": False},
        "compute_apps": {"output": f"41003, {int(minute * 10)} MiB\n", "exit_status": 0,
                         "truncated": False},
        "version": {"output": "580.82\n", "exit_status": 0, "truncated": False},
    }  # fmt: skip
    outcome = ProbeOutcome(
        status="ok", duration_ms=50, parsed=f.parsed_state(main_pid=pid), raw=sections
    )
    with time_machine.travel(T0 + dt.timedelta(minutes=minute), tick=False):
        snapshot = services.snapshot_record(
            host=host, outcome=outcome, trigger=trigger, integrity=False
        )
    return snapshot.pk


def minutes(ids: set[int]) -> list[float]:
    taken = StateSnapshot.objects.filter(pk__in=ids).values_list("taken_at", flat=True)
    return sorted((t - T0).total_seconds() / 60 for t in taken)


@pytest.fixture
def hour_of_probes() -> dict[str, int]:
    """One host probed every minute for an hour: its first probe, a restart at minute 25 (a
    new main PID) and a "probe now" at 30.5 are audited; the newest is its health's."""
    host = f.make_host("gpu-01")
    ids = {}
    for minute in range(60):
        ids[f"m{minute}"] = probe_at(host, minute, pid=41003 if minute < 25 else 52001)
    ids["manual"] = probe_at(host, 30.5, trigger="manual", pid=52001)
    return ids


def test_scheduled_probes_are_audited_only_when_something_changed(hour_of_probes) -> None:
    audited = set(
        AuditEvent.objects.filter(action="probe.completed").values_list("snapshot_id", flat=True)
    )
    assert minutes(audited) == [0, 25, 30.5]
    changed = dict(
        AuditEvent.objects.filter(action="probe.completed").values_list("snapshot_id", "data")
    )
    assert changed[hour_of_probes["m0"]]["changed"] == ["first"]
    assert changed[hour_of_probes["m25"]]["changed"] == ["material"]
    assert "changed" not in changed[hour_of_probes["manual"]]  # asked for: always audited


def test_thinning_keeps_one_per_bucket_and_everything_referenced(hour_of_probes) -> None:
    host = Host.objects.get(name="gpu-01")
    assert HostHealth.objects.get(host=host).snapshot_id == hour_of_probes["m59"]
    before = StateSnapshot.objects.count()
    assert before == 61

    # A day and a bit later: one per ten minutes, plus the audited ones and the health's.
    result = snapshots_thin(now=T0 + dt.timedelta(days=2))
    kept = set(StateSnapshot.objects.values_list("pk", flat=True))
    assert minutes(kept) == [0, 10, 20, 25, 30, 30.5, 40, 50, 59]
    assert result.removed == before - len(kept)
    assert not GpuSample.objects.exclude(snapshot_id__in=kept).exists()

    # Thinning again at the same moment changes nothing.
    assert snapshots_thin(now=T0 + dt.timedelta(days=2)).removed == 0

    # Past thirty days: one per hour, plus the referenced ones.
    snapshots_thin(now=T0 + dt.timedelta(days=40))
    kept = set(StateSnapshot.objects.values_list("pk", flat=True))
    assert minutes(kept) == [0, 25, 30.5, 59]


def test_a_snapshot_a_change_request_names_is_kept(hour_of_probes) -> None:
    host = Host.objects.get(name="gpu-01")
    deployment = f.make_deployment(host, f.make_catalog()["NVFP4"])
    decided_on = StateSnapshot.objects.get(pk=hour_of_probes["m37"])
    ChangeRequest.objects.create(
        host=host, deployment=deployment, kind="restart", snapshot=decided_on,
        reason="r", requested_by_name="otto", needs_approval=False, params_digest="-",
        correlation_id="c-1", status=ChangeStatus.CANCELLED,
    )  # fmt: skip

    snapshots_thin(now=T0 + dt.timedelta(days=40))

    assert StateSnapshot.objects.filter(pk=decided_on.pk).exists()
    assert minutes(set(StateSnapshot.objects.values_list("pk", flat=True))) == [
        0, 25, 30.5, 37, 59,
    ]  # fmt: skip


def test_blobs_go_with_the_last_snapshot_that_named_them(hour_of_probes) -> None:
    readings_before = SnapshotBlob.objects.count()
    # a process list per probe, one driver version; GPU readings are packed in each snapshot
    assert readings_before == 61 + 1

    result = snapshots_thin(now=T0 + dt.timedelta(days=40))

    kept = StateSnapshot.objects.all()
    named = {pk for s in kept for pk in s.raw_index.values() if pk}  # 0: packed, no blob
    assert set(SnapshotBlob.objects.values_list("pk", flat=True)) == named
    assert result.blobs_removed == readings_before - len(named)
    for snapshot in kept:  # what is kept still reads back whole
        minute = (snapshot.taken_at - T0).total_seconds() / 60
        assert snapshot.raw["version"]["output"] == "580.82\n"
        assert snapshot.raw["gpus"]["output"] == f"0, {97000 + int(minute * 10)} MiB\n"
        assert snapshot.raw["compute_apps"]["output"] == f"41003, {int(minute * 10)} MiB\n"


def test_the_command_thins_to_the_end_and_says_what_it_did(hour_of_probes, capsys) -> None:
    with time_machine.travel(T0 + dt.timedelta(days=40), tick=False):
        call_command("thin_snapshots")
    out = capsys.readouterr().out
    assert "removed 57 " in out
    assert StateSnapshot.objects.count() == 4
