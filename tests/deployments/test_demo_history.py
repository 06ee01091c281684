"""A fresh demo's host charts have a day to show: `simfleet --history-hours` seeds each host
that has no past with snapshots of the readings the simulator computes for a typical day,
marked as seeded, never one a change could rest on."""

from __future__ import annotations

import datetime as dt

import pytest
from django.conf import settings
from django.utils import timezone

from deployments.simfleet_registration import register_fleet, seed_gpu_history
from hosts import selectors
from hosts.charts import gpu_chart_series, window_with_data
from hosts.choices import ProbeTrigger
from hosts.models import GpuSample, Host, StateSnapshot
from simulator.server import SimFleet
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(tmp_path):
    """Two simulated hosts (one an H200 board), registered, not listening."""
    sim = SimFleet(2, base_port=2901, state_dir=tmp_path, hardware={"gpu-02": "h200"})
    register_fleet(sim.registration_info(), client_private_key=sim.client_private_key)
    return sim


def test_each_host_gets_a_day_of_readings_with_a_daily_cycle(fleet):
    now = timezone.now()
    written = seed_gpu_history(fleet.hosts, hours=24, now=now)
    assert written == 2 * 145  # every ten minutes, both ends
    for host in Host.objects.all():
        seeded = StateSnapshot.objects.filter(host=host)
        assert set(seeded.values_list("trigger", flat=True)) == {ProbeTrigger.HISTORY}
        newest = seeded.order_by("-taken_at").first()
        # never young enough to back a change, and older than the first real probe
        assert (now - newest.taken_at).total_seconds() > settings.SNAPSHOT_MAX_AGE_SECONDS
        assert GpuSample.objects.filter(host=host).count() == 145 * 8
        assert window_with_data(host) == "24h"
        day = gpu_chart_series(host, "24h", now=now)
        power = [p for p in day["series"]["power_w"]["0"] if p is not None]
        utilization = [u for u in day["series"]["utilization_pct"]["0"] if u is not None]
        assert len(power) >= 90
        assert min(utilization) == 0 and max(utilization) > 80  # quiet nights, busy afternoons
        assert max(power) > 3 * min(power)
    h200 = GpuSample.objects.filter(host__name="gpu-02").first()
    assert h200.memory_total_mib > 140_000  # each host's own hardware


def test_a_host_with_a_past_keeps_it(fleet):
    now = timezone.now()
    seed_gpu_history(fleet.hosts, hours=24, now=now)
    again = seed_gpu_history(fleet.hosts, hours=24, now=now + dt.timedelta(hours=2))
    assert again == 0
    assert StateSnapshot.objects.count() == 2 * 145


def test_a_host_probed_already_is_seeded_up_to_its_first_snapshot_only(fleet):
    now = timezone.now()
    host = Host.objects.get(name="gpu-01")
    first = f.make_snapshot(host, age=30 * 60)  # probed for half an hour already
    seed_gpu_history(fleet.hosts, hours=24, now=now)
    seeded = StateSnapshot.objects.filter(host=host, trigger=ProbeTrigger.HISTORY)
    newest = seeded.order_by("-taken_at").first().taken_at
    assert newest <= first.taken_at - dt.timedelta(minutes=10)
    assert seeded.count() == 142  # from a day ago to ten minutes before its first probe


def test_seeded_history_is_not_what_a_page_decides_on(fleet):
    seed_gpu_history(fleet.hosts, hours=24)
    host = Host.objects.get(name="gpu-01")
    latest = selectors.latest_snapshot(host)
    assert selectors.snapshot_summary(latest)["stale"]
