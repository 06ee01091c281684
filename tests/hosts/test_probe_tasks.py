"""The Celery path: a real worker process on real Redis probes the simulator."""

from __future__ import annotations

import pytest
from django.urls import reverse

from controlplane.audit.models import AuditEvent
from hosts.models import Host, StateSnapshot
from hosts.tasks import probe_due_hosts, probe_host
from tests.fleet import register
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


def test_the_worker_probes_a_host_on_demand(make_fleet, celery_worker, operator):
    fleet = register(make_fleet(2))
    host = fleet.host("gpu-01")
    probe_host.delay(host.pk, user_id=operator.pk, correlation_id="c0ffee")
    snapshot = wait_until(lambda: StateSnapshot.objects.filter(host=host).first())
    assert snapshot.status == "ok", snapshot.error
    assert snapshot.parsed["deployments"]["vllm-kimi-k25.service"]["server"]["models"] == [
        "kimi-k2.5"
    ]
    event = AuditEvent.objects.get(action="probe.completed", snapshot_id=snapshot.pk)
    assert event.actor == operator.username
    assert event.correlation_id == "c0ffee"


def test_beat_sweep_probes_only_hosts_that_are_due(make_fleet, celery_worker):
    fleet = register(make_fleet(2))
    probe_due_hosts.delay()
    wait_until(lambda: StateSnapshot.objects.count() == 2)
    assert set(Host.objects.values_list("last_probe_at", flat=True)) != {None}
    probe_due_hosts.delay()  # nothing is due again for probe_interval_seconds
    # The worker takes one task at a time in queue order, so once this marker's snapshot is
    # stored the second sweep has finished: no sleeping to prove that it probed nothing.
    probe_host.delay(fleet.host("gpu-01").pk)
    wait_until(lambda: StateSnapshot.objects.count() >= 3)
    assert StateSnapshot.objects.count() == 3
    assert AuditEvent.objects.filter(action="probe.completed", actor="system:beat").count() == 2


def test_probe_now_updates_in_place_when_the_worker_is_done(
    make_fleet, celery_worker, client, operator
):
    fleet = register(make_fleet(1))
    host = fleet.host("gpu-01")
    client.force_login(operator)
    headers = {"HX-Request": "true"}
    response = client.post(
        reverse("hosts:probe", args=[host.name]), {"view": "row"}, headers=headers
    )
    assert response.status_code == 200
    assert "probing" in response.content.decode()
    status_url = reverse("hosts:probe_status", args=[host.name]) + "?view=row&after=0"

    def done():
        polled = client.get(status_url, headers=headers)
        return polled if polled.status_code == 286 else None

    final = wait_until(done)
    assert "probing" not in final.content.decode()
    assert 'class="status status-ok"' in final.content.decode()
