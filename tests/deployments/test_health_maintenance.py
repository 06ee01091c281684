"""A host in maintenance: its verdict is decided, stored and audited as ever, and its
transitions notify nothing (the real receiver's test: tests/notifications/test_maintenance.py)."""

from __future__ import annotations

import copy
import datetime as dt

import pytest
from django.utils import timezone

from controlplane.audit.models import AuditEvent
from controlplane.notifications.events import notifications_for
from deployments import services
from hosts import services as host_services
from hosts.models import Host, HostHealth
from hosts.probe import ProbeOutcome
from tests import factories as f

pytestmark = pytest.mark.django_db
UNIT = f.UNIT


def record(host: Host, parsed) -> str:
    outcome = ProbeOutcome(status="ok", duration_ms=50, parsed=copy.deepcopy(parsed))
    host_services.snapshot_record(host=host, outcome=outcome, trigger="schedule", integrity=False)
    return HostHealth.objects.get(host=host).verdict


def test_transitions_in_maintenance_are_audited_and_notify_nothing(deployment, operator):
    services.change_target_for(deployment=deployment, kind="restart")  # adopt revision 1
    deployment.refresh_from_db()
    host = deployment.host
    healthy = f.parsed_state()
    healthy["deployments"][UNIT]["unit_file_sha256"] = deployment.current_revision.unit_sha256
    failed = copy.deepcopy(healthy)
    failed["deployments"][UNIT]["unit"]["active_state"] = "failed"
    assert record(host, healthy) == "healthy"
    host_services.host_maintenance_enter(
        host=host, user=operator, reason="reseat", until=timezone.now() + dt.timedelta(hours=1)
    )
    # The probe round's host object was loaded before maintenance began: the row decides.
    assert record(host, failed) == "failed"
    assert record(host, healthy) == "healthy"
    host_services.host_maintenance_leave(host=host, user=operator)
    assert record(host, failed) == "failed"
    events = AuditEvent.objects.filter(action="host.verdict_changed").order_by("seq")
    assert [(e.data["after"], e.data["in_maintenance"]) for e in events] == [
        ("failed", True),
        ("healthy", True),
        ("failed", False),
    ]
    notified = [[n.event_type for n in notifications_for(e)] for e in events]
    assert notified == [[], [], ["host.degraded"]]
