"""Which hosts the beat sweep probes: each once per interval, decided on the control plane's
clock (time-machine moves it; nothing sleeps)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.utils import timezone

from hosts import services
from hosts.models import Host
from hosts.probe import ProbeOutcome
from hosts.services.probing import claim_expiry_seconds
from tests import factories as f

pytestmark = pytest.mark.django_db


def _stored(*hosts: Host) -> None:
    """What a worker does with a claimed batch: probe (here: unreachable) and store."""
    outcome = ProbeOutcome(status="unreachable", duration_ms=1, error="timed out")
    services.snapshots_record(items=[(h, outcome, False) for h in hosts], trigger="schedule")


def _claimed() -> list[Host]:
    return services.hosts_claim_due_for_probe()


def test_a_host_is_claimed_once_per_interval() -> None:
    f.make_host("gpu-01")
    f.make_host("gpu-02", port=2202, probe_interval_seconds=120)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        claimed = _claimed()
        assert {h.name for h in claimed} == {"gpu-01", "gpu-02"}
        assert _claimed() == []  # an overlapping sweep gets nothing
        _stored(*claimed)
    with time_machine.travel(start + dt.timedelta(seconds=59), tick=False):
        assert _claimed() == []
    with time_machine.travel(start + dt.timedelta(seconds=60), tick=False):
        claimed = _claimed()
        assert [h.name for h in claimed] == ["gpu-01"]
        _stored(*claimed)
    with time_machine.travel(start + dt.timedelta(seconds=120), tick=False):
        assert {h.name for h in _claimed()} == {"gpu-01", "gpu-02"}


def test_the_next_probe_is_due_an_interval_after_the_claim_not_the_store() -> None:
    f.make_host("gpu-01")
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        claimed = _claimed()
    # the round took 20 s to come back (a slow host, a busy worker)
    with time_machine.travel(start + dt.timedelta(seconds=20), tick=False):
        _stored(*claimed)
        assert Host.objects.get().last_probe_at == start
        assert Host.objects.get().probe_claimed_at is None
    with time_machine.travel(start + dt.timedelta(seconds=60), tick=False):
        assert [h.name for h in _claimed()] == ["gpu-01"]


def test_an_on_demand_probe_counts_from_when_it_was_stored() -> None:
    host = f.make_host("gpu-01")
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        outcome = ProbeOutcome(status="unreachable", duration_ms=1, error="timed out")
        services.snapshots_record(items=[(host, outcome, False)], trigger="manual")
    with time_machine.travel(start + dt.timedelta(seconds=59), tick=False):
        assert _claimed() == []
    with time_machine.travel(start + dt.timedelta(seconds=60), tick=False):
        assert [h.name for h in _claimed()] == ["gpu-01"]


def test_a_host_whose_batch_was_lost_is_claimed_again_before_the_others() -> None:
    """A batch that expired in a dead worker's queue stored nothing: its hosts must not lose
    their place to hosts that were probed since."""
    f.make_host("gpu-01")
    f.make_host("gpu-02", port=2202)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        lost = services.hosts_claim_due_for_probe(limit=1)
        assert [h.name for h in lost] == ["gpu-01"]
        _stored(*_claimed())  # gpu-02 is probed
    expiry = claim_expiry_seconds(60)
    with time_machine.travel(start + dt.timedelta(seconds=expiry - 1), tick=False):
        _stored(*_claimed())  # gpu-02 again; gpu-01's claim still holds
        assert Host.objects.get(name="gpu-01").last_probe_at is None
    with time_machine.travel(start + dt.timedelta(seconds=expiry + 1), tick=False):
        assert [h.name for h in services.hosts_claim_due_for_probe(limit=1)] == ["gpu-01"]


def test_a_disabled_host_is_never_claimed() -> None:
    host = f.make_host("gpu-01")
    Host.objects.filter(pk=host.pk).update(enabled=False)
    assert services.hosts_claim_due_for_probe() == []


def test_a_host_claimed_a_little_early_keeps_its_exact_cadence() -> None:
    """The sweep claims what falls due before the next sweep (the look-ahead): the interval
    after that probe counts from when it fell due, not from the earlier claim, so a 60 s host
    is probed every 60 s and not every 55."""
    f.make_host("gpu-01")
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        _stored(*_claimed())
    with time_machine.travel(start + dt.timedelta(seconds=55), tick=False):
        early = services.hosts_claim_due_for_probe(lookahead_seconds=5)
        assert [h.name for h in early] == ["gpu-01"]
        _stored(*early)
        assert Host.objects.get().last_probe_at == start + dt.timedelta(seconds=60)
    with time_machine.travel(start + dt.timedelta(seconds=114), tick=False):
        assert services.hosts_claim_due_for_probe(lookahead_seconds=5) == []
    with time_machine.travel(start + dt.timedelta(seconds=115), tick=False):
        assert len(services.hosts_claim_due_for_probe(lookahead_seconds=5)) == 1


def test_a_late_host_counts_its_next_interval_from_its_claim() -> None:
    """A host probed late (workers behind) is not probed again at once to catch up."""
    f.make_host("gpu-01")
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        _stored(*_claimed())
    with time_machine.travel(start + dt.timedelta(seconds=90), tick=False):
        _stored(*_claimed())
        assert Host.objects.get().last_probe_at == start + dt.timedelta(seconds=90)
    with time_machine.travel(start + dt.timedelta(seconds=149), tick=False):
        assert _claimed() == []
