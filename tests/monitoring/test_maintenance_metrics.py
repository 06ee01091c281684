"""/metrics says which hosts are in maintenance and until when, on the control plane's clock."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from hosts import services
from tests import factories as f

pytestmark = pytest.mark.django_db
NOW = dt.datetime(2026, 12, 5, 9, 0, tzinfo=dt.UTC)


def test_a_gauge_per_host_and_the_end_time_while_it_lasts(scrape, operator):
    gpu1 = f.make_host("gpu-01")
    f.make_host("gpu-02", port=2202)
    f.make_snapshot(gpu1)
    until = NOW + dt.timedelta(hours=2)
    with time_machine.travel(NOW, tick=False):
        services.host_maintenance_enter(host=gpu1, user=operator, reason="reseat", until=until)
        metrics = scrape()
    assert metrics.value("controlplane_host_maintenance", host="gpu-01") == 1
    assert metrics.value("controlplane_host_maintenance", host="gpu-02") == 0
    end = metrics.value("controlplane_host_maintenance_end_timestamp_seconds", host="gpu-01")
    assert end == until.timestamp()
    assert (
        metrics.series("controlplane_host_maintenance_end_timestamp_seconds", host="gpu-02") == []
    )
    # At its end time it is over, whether or not beat has recorded the end yet.
    with time_machine.travel(until, tick=False):
        metrics = scrape()
    assert metrics.value("controlplane_host_maintenance", host="gpu-01") == 0
    assert metrics.series("controlplane_host_maintenance_end_timestamp_seconds") == []
