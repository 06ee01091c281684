"""DCGM's diagnostic on an operator's request, against simulated H200 hosts that answer
`dcgmi diag` as DCGM does: audited, never during a change, refused on MIG, kept in a snapshot
and weighed by the verdict until the next one."""

from __future__ import annotations

import pytest
from django.urls import reverse

from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from deployments import services
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest
from deployments.services import diagnostics
from hosts import services as host_services
from hosts.choices import ProbeTrigger
from hosts.models import Host
from tests.fleet import register

pytestmark = pytest.mark.integration


@pytest.fixture
def h200(db, make_fleet):
    fleet = register(make_fleet(2, hardware={"gpu-01": "h200", "gpu-02": "h100-mig"}))
    for host in fleet.hosts:
        host_services.host_probe(host=Host.objects.get(pk=host.pk), trigger="manual")
    return fleet


def test_a_failed_diagnostic_is_kept_and_fails_the_host_until_the_next_passes(
    h200, operator, django_capture_on_commit_callbacks
):
    host = Host.objects.get(name="gpu-01")
    assert host.health.verdict == "healthy"
    h200.set_fault("gpu-01", "row_remap_failure")
    with django_capture_on_commit_callbacks() as queued:
        diagnostics.gpu_diagnostic_request(host=host, level=1, user=operator)
    # the task, sent by name once the request commits (beside the audit event's notifications)
    sends = [cb for cb in queued if "gpu_diagnostic_send" in getattr(cb, "__qualname__", "")]
    assert len(sends) == 1
    event = AuditEvent.objects.get(action=AuditAction.HOST_GPU_DIAGNOSTIC_REQUESTED)
    assert event.data == {"level": 1, "command": "dcgmi diag -r 1 -j"}

    snapshot = diagnostics.gpu_diagnostic_run(host_id=host.pk, level=1)

    assert snapshot is not None and snapshot.trigger == ProbeTrigger.DIAGNOSTIC
    result = snapshot.state().gpu_diagnostic
    assert result is not None and result.error is None and result.level == 1
    (failed,) = result.failed
    assert (failed.name, failed.gpus) == ("Page Retirement/Row Remap", [5])
    host.refresh_from_db()
    assert host.gpu_diagnostic_snapshot_id == snapshot.pk
    reasons = {r["code"]: r["text"] for r in host.health.reasons}
    assert host.health.verdict == "failed"
    assert "Page Retirement/Row Remap on GPU 5" in reasons["gpu_diagnostic_failed"]

    # A scheduled probe does not forget it; a diagnostic that passes does.
    host_services.host_probe(host=host, trigger="schedule")
    host.refresh_from_db()
    assert "gpu_diagnostic_failed" in {r["code"] for r in host.health.reasons}
    h200.set_fault("gpu-01", "row_remap_failure", on=False)
    diagnostics.gpu_diagnostic_run(host_id=host.pk, level=2)
    host.refresh_from_db()
    codes = {r["code"] for r in host.health.reasons}
    # The diagnostic passes now; the remap failure's Xid 64 stays in this boot's kernel log.
    assert "gpu_diagnostic_failed" not in codes and codes == {"xid_fatal"}


def test_no_diagnostic_during_a_change_on_mig_or_at_an_unknown_level(h200, operator, viewer):
    host = Host.objects.get(name="gpu-01")
    change = services.change_request_create(
        user=operator, deployment=host.deployments.get(), kind="restart",
        snapshot=host.snapshots.latest("taken_at"), reason="a restart queued first",
    )  # fmt: skip
    assert change.status == ChangeStatus.QUEUED
    with pytest.raises(services.ChangeRefused, match="never runs during a change"):
        diagnostics.gpu_diagnostic_request(host=host, level=1, user=operator)
    ChangeRequest.objects.filter(pk=change.pk).update(status=ChangeStatus.CANCELLED)
    with pytest.raises(services.ChangeRefused, match="level 1 or 2, not 3"):
        diagnostics.gpu_diagnostic_request(host=host, level=3, user=operator)
    with pytest.raises(services.ChangeRefused, match="needs the operator role") as refused:
        diagnostics.gpu_diagnostic_request(host=host, level=1, user=viewer)
    assert refused.value.code == "forbidden"
    mig = Host.objects.get(name="gpu-02")
    with pytest.raises(services.ChangeRefused, match="MIG-partitioned"):
        diagnostics.gpu_diagnostic_request(host=mig, level=1, user=operator)
    assert not AuditEvent.objects.filter(action=AuditAction.HOST_GPU_DIAGNOSTIC_REQUESTED).exists()


def test_a_change_that_started_meanwhile_stops_the_worker(h200, operator):
    host = Host.objects.get(name="gpu-01")
    before = host.snapshots.count()
    change = services.change_request_create(
        user=operator, deployment=host.deployments.get(), kind="restart",
        snapshot=host.snapshots.latest("taken_at"), reason="started after the request",
    )  # fmt: skip
    assert change.status == ChangeStatus.QUEUED
    assert diagnostics.gpu_diagnostic_run(host_id=host.pk, level=1) is None
    assert host.snapshots.count() == before


def test_the_host_page_runs_one_and_shows_what_it_found(h200, client, operator, viewer):
    url = reverse("hosts:detail", args=["gpu-01"])
    client.force_login(viewer)
    assert "Run GPU diagnostic" not in client.get(url).content.decode()
    host = Host.objects.get(name="gpu-01")
    h200.set_fault("gpu-01", "persistence_off")
    diagnostics.gpu_diagnostic_run(host_id=host.pk, level=1)
    body = client.get(url).content.decode()
    assert "Persistence Mode" in body and "Persistence mode for GPU 0 is disabled" in body
    client.force_login(operator)
    assert "Run GPU diagnostic" in client.get(url).content.decode()
    response = client.post(reverse("deployments:gpu_diagnostic", args=["gpu-01"]), {"level": "9"})
    assert response.status_code == 302
    assert not AuditEvent.objects.filter(action=AuditAction.HOST_GPU_DIAGNOSTIC_REQUESTED).exists()


def test_a_host_without_dcgm_says_so_and_weighs_nothing(make_fleet, db):
    fleet = register(make_fleet(1))  # RTX PRO 6000 boards: no DCGM installed
    host = Host.objects.get(pk=fleet.hosts[0].pk)
    snapshot = diagnostics.gpu_diagnostic_run(host_id=host.pk, level=1)
    assert snapshot is not None and snapshot.status == "ok", snapshot.error
    result = snapshot.state().gpu_diagnostic
    assert result is not None and result.error == "DCGM is not installed on this host (no dcgmi)"
    host.refresh_from_db()
    assert host.health.verdict == "healthy"
