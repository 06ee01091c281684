"""Every host page answers its personas correctly: viewers read, operators probe, admins pin."""

from __future__ import annotations

import pytest
from django.urls import reverse

from controlplane.audit.models import AuditEvent
from hosts.choices import HostKeyStatus
from hosts.models import Host
from tests import factories as f

pytestmark = pytest.mark.django_db

READ_URLS = [
    ("hosts:dashboard", []),
    ("hosts:dashboard_rows", []),
    ("hosts:detail", ["gpu-01"]),
    ("hosts:probe_status", ["gpu-01"]),
]


@pytest.fixture
def host():
    host = f.make_host("gpu-01")
    f.make_deployment(host, f.make_catalog()["NVFP4"])
    return host


@pytest.mark.parametrize(("name", "args"), READ_URLS)
def test_anonymous_users_are_sent_to_sign_in(client, host, name, args):
    response = client.get(reverse(name, args=args))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


@pytest.mark.parametrize(("name", "args"), READ_URLS)
def test_users_without_a_role_are_refused(client, host, outsider, name, args):
    client.force_login(outsider)
    assert client.get(reverse(name, args=args)).status_code == 403


def test_the_dashboard_shows_the_latest_snapshot_of_each_host(client, host, viewer):
    f.make_snapshot(host, age=400)
    f.make_snapshot(host, age=12)
    client.force_login(viewer)
    response = client.get(reverse("hosts:dashboard"))
    body = response.content.decode()
    assert response.status_code == 200
    assert 'data-age="12"' in body
    assert "kimi-k2.5" in body
    assert body.count('class="gpubar"') == 8
    assert "Probe now" not in body  # viewers cannot probe


def test_the_fleet_shows_the_newest_engine_check_when_the_newest_probe_made_none(
    client, host, viewer
):
    """Engine files are checked on their own schedule: a scheduled probe after a check that
    found a patch must not hide it."""
    f.make_integrity_snapshot(host, modified=("vllm/model_executor/layers/sampler.py",), age=300)
    f.make_snapshot(host, age=10)
    client.force_login(viewer)
    body = client.get(reverse("hosts:dashboard")).content.decode()
    assert ">patched</span>" in body
    assert "vllm/model_executor/layers/sampler.py" in body


def test_a_stale_snapshot_is_marked_stale(client, host, viewer):
    f.make_snapshot(host, age=400)
    client.force_login(viewer)
    body = client.get(reverse("hosts:dashboard")).content.decode()
    assert 'class="age stale"' in body


def test_the_snapshot_page_shows_parsed_and_raw_output(client, host, viewer):
    snapshot = f.make_snapshot(host)
    client.force_login(viewer)
    response = client.get(reverse("hosts:snapshot", args=[snapshot.pk]))
    assert response.status_code == 200
    assert snapshot.digest in response.content.decode()


def test_viewers_cannot_probe(client, host, viewer):
    client.force_login(viewer)
    assert client.post(reverse("hosts:probe", args=["gpu-01"])).status_code == 403


def test_probe_needs_post(client, host, operator):
    client.force_login(operator)
    assert client.get(reverse("hosts:probe", args=["gpu-01"])).status_code == 405


def test_an_unknown_host_is_a_404(client, viewer):
    client.force_login(viewer)
    assert client.get(reverse("hosts:detail", args=["nope"])).status_code == 404


def _presenting_new_key(host: Host) -> Host:
    Host.objects.filter(pk=host.pk).update(
        host_key_status=HostKeyStatus.CHANGED, presented_host_key=f.CLIENT_PUBLIC_KEY
    )
    host.refresh_from_db()
    return host


def test_only_admins_can_accept_a_changed_host_key(client, host, operator, admin_user):
    host = _presenting_new_key(host)
    fingerprint = host.presented_key_fingerprint
    client.force_login(operator)
    url = reverse("hosts:accept_key", args=["gpu-01"])
    assert client.post(url, {"fingerprint": fingerprint}).status_code == 403
    client.force_login(admin_user)
    response = client.post(url, {"fingerprint": fingerprint, "reason": "checked on the console"})
    assert response.status_code == 302
    host.refresh_from_db()
    assert host.host_key_status == HostKeyStatus.PINNED
    assert host.host_key_fingerprint == fingerprint
    event = AuditEvent.objects.get(action="host.key_accepted")
    assert event.actor == admin_user.username
    assert event.data["reason"] == "checked on the console"
    assert event.data["after"]["fingerprint"] == fingerprint


def test_accepting_a_key_other_than_the_one_reviewed_is_refused(client, host, admin_user):
    _presenting_new_key(host)
    client.force_login(admin_user)
    client.post(reverse("hosts:accept_key", args=["gpu-01"]), {"fingerprint": "SHA256:other"})
    host.refresh_from_db()
    assert host.host_key_status == HostKeyStatus.CHANGED
    assert not AuditEvent.objects.filter(action="host.key_accepted").exists()


def test_the_host_page_has_no_secret(client, host, admin_user):
    client.force_login(admin_user)
    body = client.get(reverse("hosts:detail", args=["gpu-01"])).content.decode()
    assert f.CLIENT_KEY.splitlines()[1] not in body
    assert host.credential.private_key_encrypted[:40] not in body
