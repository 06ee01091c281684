"""Fault 5: host clocks far from the control plane's.

gpu-01's wall clock runs five hours ahead, gpu-02's five hours behind (NTP stopped long ago);
both restart their service by hand so that what systemd prints is stamped on the wrong clock.
A snapshot's time and age, and so every freshness decision, must come from the control plane's
clock: a host five hours behind must not make a fresh snapshot stale, nor one five hours ahead
make an old snapshot look new forever.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pytest
from django.utils import timezone

from deployments import services
from deployments.choices import ChangeStatus
from hosts import services as host_services
from hosts.models import HostHealth
from hosts.parsers.systemd import parse_systemd_timestamp
from tests.chaos.conftest import RedisServer, broker, http_get, session_for
from tests.chaos.jobs import probe
from tests.fleet import register

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.realtime]

SKEW = {"gpu-01": 5 * 3600.0, "gpu-02": -5 * 3600.0}
UNIT = "vllm-kimi-k25.service"


def test_snapshot_age_and_freshness_come_from_the_control_planes_clock(
    make_fleet: Any, live_server: Any, operator: Any, redis_server: RedisServer
) -> None:
    fleet = register(make_fleet(2))
    for name, seconds in SKEW.items():
        fleet.set_clock_skew(seconds, name)
        fleet.restart_unit(name)
        fleet.wait_for_unit(name, UNIT, "ready")
    session = session_for(operator)
    for name, seconds in SKEW.items():
        host = fleet.host(name)
        before = timezone.now()
        snapshot = probe(host)
        after = timezone.now()
        # The fault is real: what the host reports is stamped five hours off.
        started = parse_systemd_timestamp(snapshot.state().unit_state(UNIT).active_enter_timestamp)
        assert started is not None
        assert abs((started - before).total_seconds() - seconds) < 120, (name, started, before)
        # The snapshot's time is the control plane's, and so is its age.
        assert before <= snapshot.taken_at <= after
        assert 0 <= snapshot.age_seconds() < 5
        # Fresh enough to act on: the one freshness rule, then a real request on it.
        host_services.snapshot_require_fresh(snapshot=snapshot, host=host)
        with broker(redis_server.url):
            change = services.change_request_create(
                user=operator, deployment=host.deployments.get(), kind="restart",
                snapshot=snapshot, reason="pick up the new driver",
            )  # fmt: skip
        assert change.status == ChangeStatus.QUEUED
        services.change_request_cancel(change=change, user=operator)
        # The verdict does not call the host stale (nor anything else: it is healthy).
        services.host_health_update(host=host)
        health = HostHealth.objects.get(host=host)
        assert health.verdict == "healthy", health.reasons
        # The host page shows the snapshot's age in seconds, fresh, and its time in UTC.
        status, _, page = http_get(f"{live_server.url}/hosts/{name}/", session)
        assert status == 200
        age = re.search(r'class="age (\w+)" data-age="(-?\d+)"', page)
        assert age is not None and age.group(1) == "fresh" and 0 <= int(age.group(2)) < 5, age
        assert f"{snapshot.taken_at:%Y-%m-%d %H:%M}" in page
        # So does the API.
        status, _, body = http_get(
            f"{live_server.url}/api/v1/snapshots/{snapshot.pk}/", session, "application/json"
        )
        assert status == 200, body[:300]
        data = json.loads(body)
        assert 0 <= data["age_seconds"] < 5
        taken = dt.datetime.fromisoformat(data["taken_at"].replace("Z", "+00:00"))
        assert abs((taken - snapshot.taken_at).total_seconds()) < 0.01
