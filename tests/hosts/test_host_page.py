"""The host page shows at least what an engineer gets from `systemctl status`, `journalctl`
and `nvidia-smi` by hand, from a probe of a simulated host, and never a secret."""

from __future__ import annotations

import pytest
from django.urls import reverse

from controlplane.audit.models import AuditEvent
from hosts import services
from hosts.models import Host
from simulator import catalog
from tests.fleet import register

pytestmark = pytest.mark.integration
UNIT = "vllm-kimi-k25.service"


@pytest.fixture
def envfile_host(db, make_fleet):
    fleet = register(make_fleet(1, unit_styles={"gpu-01": "envfile"}))
    host = Host.objects.get(name="gpu-01")
    snapshot = services.host_probe(host=host, trigger="manual")
    assert snapshot.status == "ok", snapshot.error
    return fleet, host


def test_the_host_page_has_systemctl_status_and_nvidia_smi_parity(envfile_host, client, viewer):
    _fleet, host = envfile_host
    client.force_login(viewer)
    body = client.get(reverse("hosts:detail", args=[host.name])).content.decode()
    for fact in (
        "systemctl status", "Loaded", "/etc/systemd/system/vllm-kimi-k25.service", "Tasks",
        "Memory", "CPU", "Restarts", "/etc/vllm/kimi-k25.env", "LimitNOFILE=1048576",
        "Driver 580", "CUDA", "PCIe", "Gen ", "persistence", "VLLM::Worker_TP0", UNIT,
        "no NVLink",
    ):  # fmt: skip
        assert fact in body, fact
    assert catalog.FAKE_HF_TOKEN not in body
    assert 'id="health"' in body and "verdict" in body
    # Every deployment links to its revisions (comparison, unit diffs).
    deployment = host.deployments.get()
    assert reverse("deployments:revisions", args=[deployment.pk]) in body


def test_the_journal_is_read_on_demand_and_audited(envfile_host, client, viewer):
    _fleet, host = envfile_host
    client.force_login(viewer)
    response = client.get(reverse("hosts:journal", args=[host.name, UNIT]))
    body = response.content.decode()
    assert response.status_code == 200
    assert "Application startup complete" in body or "Started" in body
    assert catalog.FAKE_HF_TOKEN not in body
    assert AuditEvent.objects.filter(action="host.journal_read", host_id=host.pk).exists()


def test_only_deployed_units_have_a_journal_here(envfile_host, client, viewer):
    _fleet, host = envfile_host
    client.force_login(viewer)
    response = client.get(reverse("hosts:journal", args=[host.name, "ssh.service"]))
    assert response.status_code == 200
    assert "is not deployed on gpu-01" in response.content.decode()


def test_a_host_clock_far_off_is_named_and_uptime_is_on_the_hosts_clock(
    db, make_fleet, client, viewer
):
    fleet = register(make_fleet(1))
    fleet.set_clock_skew(5 * 3600)  # its NTP stopped: five hours ahead
    fleet.restart_unit("gpu-01")  # systemd stamps the start on the host's clock
    host = Host.objects.get(name="gpu-01")
    snapshot = services.host_probe(host=host, trigger="manual")
    assert abs(snapshot.state().host_time - snapshot.taken_at.timestamp() - 5 * 3600) < 5
    client.force_login(viewer)
    body = client.get(reverse("hosts:detail", args=[host.name])).content.decode()
    assert "The host's clock is 5h 0min ahead of the control plane's" in body
    # Started just now on the host's clock: not "5h ago", not negative.
    assert "; 0s ago" in body or "; 1s ago" in body or "; 2s ago" in body, body[:200]
