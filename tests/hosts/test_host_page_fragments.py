"""The host page keeps its snapshot history and audit timeline rendered (they list rows that
never change once written), under a digest of what they show: a new snapshot or event shows at
once, and no host's list is ever shown on another's page."""

from __future__ import annotations

import re

import pytest
from django.core.cache import caches
from django.urls import reverse

from controlplane.audit import services as audit
from controlplane.audit.context import acting
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fragments():
    caches["fragments"].clear()
    yield
    caches["fragments"].clear()


def section(client, host, name: str) -> str:
    body = client.get(reverse("hosts:detail", args=[host.name])).content.decode()
    start = body.index(f'id="{name}"')
    return body[start : body.index("</section>", start)]


def test_a_new_snapshot_shows_in_the_history_at_once(client, viewer):
    host = f.make_host()
    first = f.make_snapshot(host, age=60)
    client.force_login(viewer)
    assert f"/snapshots/{first.pk}/" in section(client, host, "snapshot-history")
    second = f.make_snapshot(host, age=1, status="unreachable", parsed={})
    history = section(client, host, "snapshot-history")
    assert f"/snapshots/{second.pk}/" in history and "status-unreachable" in history
    second.delete()  # retention took it
    assert f"/snapshots/{second.pk}/" not in section(client, host, "snapshot-history")


def test_a_new_event_shows_in_the_timeline_at_once(client, viewer):
    host = f.make_host()
    snapshot = f.make_snapshot(host)
    client.force_login(viewer)
    before = section(client, host, "host-timeline")
    with acting("system:beat"):
        event = audit.record(action="probe.completed", target=snapshot, host=host,
                             snapshot=snapshot, data={"status": "ok"})  # fmt: skip
    after = section(client, host, "host-timeline")
    link = reverse("audit:event", args=[event.seq])
    assert link in after and link not in before


def test_each_host_shows_its_own_lists(client, viewer):
    one, two = f.make_host("gpu-01"), f.make_host("gpu-02")
    snapshots = {host.name: f.make_snapshot(host) for host in (one, two)}
    client.force_login(viewer)
    for host, other in ((one, two), (two, one)):
        history = section(client, host, "snapshot-history")
        assert f"/snapshots/{snapshots[host.name].pk}/" in history
        assert f"/snapshots/{snapshots[other.name].pk}/" not in history
        links = re.findall(r"\?host=(\d+)", section(client, host, "host-timeline"))
        assert set(links) <= {str(host.pk)}
