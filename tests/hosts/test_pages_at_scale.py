"""The pages people keep open do a fixed number of queries however many rows there are: the
fleet page, a host's page, the approvals queue and the audit history. (How fast they are at
10,000 hosts is measured in bench/pages_scale.py, not here.)"""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest
from hosts.choices import HostKeyStatus
from hosts.models import Host, HostHealth, StateSnapshot
from hosts.state import snapshot_digest
from tests import factories as f

pytestmark = pytest.mark.django_db


def queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    return len(captured)


def add_hosts(count: int, start: int = 0) -> list[Host]:
    credential = f.make_host(f"seed-{start}").credential
    hosts = Host.objects.bulk_create(
        Host(name=f"node-{start + i:05d}", address="127.0.0.1", port=2201, credential=credential,
             host_key=f.HOST_KEY, host_key_status=HostKeyStatus.PINNED)
        for i in range(count)
    )  # fmt: skip
    now = timezone.now()
    parsed = f.parsed_state()
    snapshots = StateSnapshot.objects.bulk_create(
        StateSnapshot(host=h, taken_at=now, status="ok", trigger="schedule", duration_ms=50,
                      parsed=parsed, digest=snapshot_digest(parsed))
        for h in hosts
    )  # fmt: skip
    HostHealth.objects.bulk_create(
        HostHealth(host=h, verdict="healthy", severity=0, since=now, computed_at=now, snapshot=s)
        for h, s in zip(hosts, snapshots, strict=True)
    )
    return hosts


def add_history(host: Host, count: int) -> None:
    now = timezone.now()
    parsed = f.parsed_state()
    StateSnapshot.objects.bulk_create(
        StateSnapshot(host=host, taken_at=now - dt.timedelta(minutes=i), status="ok",
                      trigger="schedule", duration_ms=50, parsed=parsed,
                      digest=snapshot_digest(parsed))
        for i in range(count)
    )  # fmt: skip


def test_the_fleet_page_does_not_load_every_host(client, viewer, django_assert_max_num_queries):
    client.force_login(viewer)
    add_hosts(10)
    few = queries(client, reverse("hosts:dashboard"))
    add_hosts(140, start=10)
    with django_assert_max_num_queries(few):
        client.get(reverse("hosts:dashboard") + "?sort=age&page=2")
    many = queries(client, reverse("hosts:dashboard") + "?verdict=healthy&q=node")
    assert many <= few
    rows = client.get(reverse("hosts:dashboard")).content.decode().count('id="host-row-')
    assert 0 < rows <= 50


def test_a_host_page_with_a_long_history(client, viewer, django_assert_max_num_queries):
    client.force_login(viewer)
    host = f.make_host("gpu-01")
    f.make_deployment(host, f.make_catalog()["NVFP4"])
    add_history(host, 10)
    url = reverse("hosts:detail", args=[host.name])
    few = queries(client, url)
    add_history(host, 2000)
    with django_assert_max_num_queries(few):
        client.get(url)
    with django_assert_max_num_queries(5):
        client.get(reverse("hosts:gpu_series", args=[host.name]) + "?window=7d")


def waiting_changes(count: int, catalog: dict) -> None:
    for i in range(count):
        host = f.make_host(f"appr-{ChangeRequest.objects.count():04d}-{i}", port=2201)
        deployment = f.make_deployment(host, catalog["NVFP4"])
        ChangeRequest.objects.create(
            host=host, deployment=deployment, kind="model_swap",
            snapshot=f.make_snapshot(host), reason="faster", requested_by_name="otto",
            needs_approval=True, params_digest="-", correlation_id=f"c-{host.pk}",
            status=ChangeStatus.PENDING_APPROVAL,
        )  # fmt: skip


def test_the_approvals_queue_with_many_waiting(client, approver, django_assert_max_num_queries):
    client.force_login(approver)
    catalog = f.make_catalog()
    waiting_changes(3, catalog)
    few = queries(client, reverse("deployments:approvals"))
    waiting_changes(30, catalog)
    with django_assert_max_num_queries(few):
        client.get(reverse("deployments:approvals"))


def test_the_audit_history_during_a_probe_storm(client, viewer, django_assert_max_num_queries):
    client.force_login(viewer)
    host = f.make_host("gpu-01")

    def storm(count: int) -> None:
        snapshot = f.make_snapshot(host)
        audit.record_many(
            [{"action": AuditAction.PROBE_COMPLETED, "target": snapshot, "host": host,
              "snapshot": snapshot, "data": {"status": "ok", "trigger": "manual"}}] * count
        )  # fmt: skip

    storm(5)
    few = queries(client, reverse("audit:history"))
    storm(500)
    with django_assert_max_num_queries(few):
        client.get(reverse("audit:history"))
    with django_assert_max_num_queries(few):
        client.get(reverse("audit:history") + f"?host={host.name}&action=probe.completed")
