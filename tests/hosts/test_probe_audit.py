"""Which probes write an audit event: every one someone asked for, and a scheduled one only
when the host's status, material state or verdict moved."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.audit.models import AuditEvent
from hosts import services
from hosts.models import Host, HostHealth
from hosts.probe import ProbeOutcome
from tests import factories as f

pytestmark = pytest.mark.django_db


def probe(host: Host, trigger: str = "schedule", status: str = "ok", **state: Any) -> int:
    parsed = f.parsed_state(**state) if status in ("ok", "partial") else {}
    outcome = ProbeOutcome(status=status, duration_ms=40, parsed=parsed,
                           error="" if parsed else "connect timed out")  # fmt: skip
    return services.snapshot_record(host=host, outcome=outcome, trigger=trigger, integrity=False).pk


def audited() -> list[tuple[int | None, list[str] | None]]:
    events = AuditEvent.objects.filter(action="probe.completed").order_by("seq")
    return [(e.snapshot_id, e.data.get("changed")) for e in events]


def test_a_steady_host_is_audited_once_then_on_every_status_change() -> None:
    host = f.make_host("gpu-01")
    first = probe(host)
    for _ in range(5):
        probe(host)
    down = probe(host, status="unreachable")
    probe(host, status="unreachable")
    back = probe(host)
    probe(host)

    assert audited() == [(first, ["first"]), (down, ["status", "material"]), (back, ["status",
                         "material"])]  # fmt: skip


def test_gpu_readings_alone_are_not_a_change_but_a_new_model_is() -> None:
    host = f.make_host("gpu-01")
    probe(host, used_mib=96900)
    probe(host, used_mib=51000)  # memory moves all the time: not material
    swapped = probe(host, model="kimi-k2.5-int4")
    assert [changed for _, changed in audited()] == [["first"], ["material"]]
    assert audited()[-1][0] == swapped


@pytest.mark.parametrize("trigger", ["manual", "cli", "job"])
def test_probes_someone_asked_for_are_always_audited(trigger: str) -> None:
    host = f.make_host("gpu-01")
    ids = [probe(host, trigger=trigger) for _ in range(3)]
    assert [snapshot for snapshot, _ in audited()] == ids


def test_a_verdict_that_moved_on_an_unchanged_probe_is_audited_with_its_snapshot() -> None:
    host = f.make_host("gpu-01")
    probe(host)
    probe(host)
    assert len(audited()) == 1
    # the stored verdict says something else than the evidence will: the next probe moves it
    HostHealth.objects.filter(host=host).update(verdict="failed", since=timezone.now())
    moved = probe(host)
    assert audited()[-1] == (moved, ["verdict"])
    assert AuditEvent.objects.filter(action="host.verdict_changed").exists()
