"""A host in maintenance sends no verdict webhooks: its verdict still moves and is still audited,
but host.degraded, host.recovered and host.unreachable wait until it is out. Real probes of a
simulated host, a real Celery worker on real Redis, a receiver on loopback."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from controlplane.audit.models import AuditEvent
from controlplane.notifications.models import WebhookDelivery
from hosts import services as host_services
from hosts.models import Host, HostHealth
from tests.fleet import register

from .conftest import SECRET, wait_until_settled

pytestmark = pytest.mark.integration
VERDICT_EVENTS = ["host.degraded", "host.recovered", "host.unreachable"]


def probe(host: Host) -> str:
    host = Host.objects.select_related("credential").get(pk=host.pk)
    host_services.host_probe(host=host, trigger="manual")
    return HostHealth.objects.get(host=host).verdict


def test_a_host_in_maintenance_is_judged_and_audited_but_notifies_nothing(
    make_fleet, webhook_worker, receiver, make_endpoint, operator
):
    fleet = register(make_fleet(1))
    host = fleet.host("gpu-01")
    make_endpoint(receiver.url, events=VERDICT_EVENTS)
    assert probe(host) == "healthy"
    host_services.host_maintenance_enter(
        host=host,
        user=operator,
        reason="reseating GPU 3",
        until=timezone.now() + dt.timedelta(hours=2),
    )

    fleet.crash_unit("gpu-01")
    assert probe(host) == "failed"
    fleet.set_fault("gpu-01", "unreachable")
    assert probe(host) == "unknown"
    fleet.set_fault("gpu-01", "unreachable", False)
    assert probe(host) == "failed"

    moves = AuditEvent.objects.filter(action="host.verdict_changed").order_by("seq")
    assert [(e.data["before"], e.data["after"], e.data["in_maintenance"]) for e in moves] == [
        ("healthy", "failed", True),
        ("failed", "unknown", True),
        ("unknown", "failed", True),
    ]
    # Deliveries are made as each event commits, in this process: none was.
    assert not WebhookDelivery.objects.exists()

    host_services.host_maintenance_leave(host=host, user=operator)
    fleet.set_fault("gpu-01", "unreachable")
    assert probe(host) == "unknown"
    (down,) = receiver.wait_for("host.unreachable")
    fleet.set_fault("gpu-01", "unreachable", False)
    assert probe(host) == "failed"
    (degraded,) = receiver.wait_for("host.degraded")
    wait_until_settled()
    assert sorted(r.event for r in receiver.received()) == ["host.degraded", "host.unreachable"]
    assert down.signed_by(SECRET) and degraded.signed_by(SECRET)
    assert degraded.json["text"].startswith("gpu-01 is failed (was unknown)")
    last = AuditEvent.objects.filter(action="host.verdict_changed").order_by("-seq").first()
    assert last is not None and last.data["in_maintenance"] is False
