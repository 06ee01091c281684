"""host.unreachable waits too while someone works on the host: a reboot in maintenance is
expected. A changed host key is a security event and is never silenced."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from controlplane.notifications.events import notifications_for
from hosts import services as host_services
from hosts.models import Host, StateSnapshot
from hosts.state import snapshot_digest
from tests import factories as f

pytestmark = pytest.mark.django_db


def probe_event(host: Host, status: str) -> AuditEvent:
    parsed = f.parsed_state() if status == "ok" else {}
    snapshot = StateSnapshot.objects.create(
        host=host, taken_at=timezone.now(), status=status, trigger="schedule", duration_ms=5,
        parsed=parsed, digest=snapshot_digest(parsed),
    )  # fmt: skip
    return audit.record(
        action=AuditAction.PROBE_COMPLETED, target=snapshot, host=host, snapshot=snapshot,
        data={"status": status, "trigger": "schedule", "duration_ms": 5},
    )  # fmt: skip


def test_unreachable_in_maintenance_notifies_nothing_and_after_it_does(operator):
    host = f.make_host("gpu-01")
    assert notifications_for(probe_event(host, "ok")) == []
    host_services.host_maintenance_enter(
        host=host, user=operator, reason="reboot", until=timezone.now() + dt.timedelta(hours=1)
    )
    assert notifications_for(probe_event(host, "unreachable")) == []
    audit.record(
        action=AuditAction.HOST_KEY_CHANGED, target=host, data={"presented_fingerprint": "x"}
    )
    changed = AuditEvent.objects.filter(action=AuditAction.HOST_KEY_CHANGED).get()
    assert [n.event_type for n in notifications_for(changed)] == ["host.key_changed"]
    host_services.host_maintenance_leave(host=host, user=operator)
    assert notifications_for(probe_event(host, "ok")) == []
    (note,) = notifications_for(probe_event(host, "unreachable"))
    assert note.event_type == "host.unreachable"
