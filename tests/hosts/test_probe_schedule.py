"""Which hosts the beat sweep probes: each once per interval, decided on the control plane's
clock (time-machine moves it; nothing sleeps)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.utils import timezone

from hosts import services
from hosts.models import Host
from tests import factories as f

pytestmark = pytest.mark.django_db


def test_a_host_is_claimed_once_per_interval() -> None:
    f.make_host("gpu-01")
    f.make_host("gpu-02", port=2202, probe_interval_seconds=120)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        assert {h.name for h in services.hosts_claim_due_for_probe()} == {"gpu-01", "gpu-02"}
        assert services.hosts_claim_due_for_probe() == []  # an overlapping sweep gets nothing
    with time_machine.travel(start + dt.timedelta(seconds=59), tick=False):
        assert services.hosts_claim_due_for_probe() == []
    with time_machine.travel(start + dt.timedelta(seconds=60), tick=False):
        assert [h.name for h in services.hosts_claim_due_for_probe()] == ["gpu-01"]
    with time_machine.travel(start + dt.timedelta(seconds=120), tick=False):
        assert {h.name for h in services.hosts_claim_due_for_probe()} == {"gpu-01", "gpu-02"}


def test_a_disabled_host_is_never_claimed() -> None:
    host = f.make_host("gpu-01")
    Host.objects.filter(pk=host.pk).update(enabled=False)
    assert services.hosts_claim_due_for_probe() == []
