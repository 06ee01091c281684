"""Webhooks with host groups: an endpoint limited to host groups hears only of their hosts, and
a person reads only the deliveries about hosts in their scope (and those about no host)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from controlplane.notifications import services
from controlplane.notifications.models import WebhookEndpoint

from .conftest import PUBLIC_ADDRESS, SECRET

pytestmark = pytest.mark.django_db
URL = f"https://{PUBLIC_ADDRESS}/hooks"


def key_changed(host) -> AuditEvent:
    return audit.record(
        action=AuditAction.HOST_KEY_CHANGED, target=host, data={"presented_fingerprint": "x"}
    )


@pytest.fixture
def endpoints(teams, admin_user) -> dict[str, WebhookEndpoint]:
    def make(name: str, groups) -> WebhookEndpoint:
        return services.endpoint_create(
            actor=admin_user, name=name, url=URL, secret=SECRET,
            event_types=["host.key_changed"], host_groups=groups,
        )  # fmt: skip

    return {"team-a": make("team-a-pager", [teams.team_a]), "all": make("ops", [])}


def test_an_endpoint_limited_to_groups_hears_only_of_their_hosts(teams, endpoints):
    prod_only = services.deliveries_create_for_event(event=key_changed(teams.hosts["gpu-01"]))
    assert [d.endpoint_name for d in prod_only] == ["ops"]
    shared = services.deliveries_create_for_event(event=key_changed(teams.hosts["gpu-02"]))
    assert sorted(d.endpoint_name for d in shared) == ["ops", "team-a-pager"]
    assert {d.host_id for d in shared} == {teams.hosts["gpu-02"].pk}


def test_a_person_reads_the_deliveries_about_hosts_in_their_scope(
    client, teams, endpoints, scoped, admin_user
):
    hidden = services.deliveries_create_for_event(event=key_changed(teams.hosts["gpu-01"]))[0]
    seen = services.deliveries_create_for_event(event=key_changed(teams.hosts["gpu-03"]))[0]
    ping = services.endpoint_send_test(actor=admin_user, endpoint=endpoints["all"])
    client.force_login(scoped("ann", "viewer", "team-a"))
    page = client.get(reverse("notifications:index")).content.decode()
    listed = set(re.findall(r'href="/notifications/deliveries/(\d+)/"', page))
    assert str(hidden.pk) not in listed
    assert {str(seen.pk), str(ping.pk)} <= listed
    assert client.get(reverse("notifications:delivery", args=[hidden.pk])).status_code == 404
    assert client.get(reverse("notifications:delivery", args=[seen.pk])).status_code == 200


def test_an_administrator_picks_an_endpoints_groups_on_its_form(client, teams, admin_user):
    client.force_login(admin_user)
    response = client.post(
        reverse("notifications:endpoint_create"),
        {"name": "prod-pager", "url": URL, "secret": SECRET, "event_types": ["host.key_changed"],
         "host_groups": [str(teams.prod.pk)], "active": "on"},
    )  # fmt: skip
    assert response.status_code == 302
    endpoint = WebhookEndpoint.objects.get(name="prod-pager")
    assert list(endpoint.host_groups.values_list("name", flat=True)) == ["prod"]
    created = AuditEvent.objects.get(action="webhook.created", target_id=str(endpoint.pk))
    assert created.data["after"]["host_groups"] == ["prod"]
    form = client.get(reverse("notifications:endpoint_edit", args=[endpoint.pk])).content.decode()
    assert re.search(rf'value="{teams.prod.pk}"[^>]*checked', form)
    listed = client.get(reverse("notifications:index")).content.decode()
    assert '<span class="tag">prod</span>' in listed


def test_an_event_about_several_hosts_reaches_an_endpoint_that_hears_of_them_all(
    client, teams, endpoints, scoped
):
    """An event may name further hosts than its own (a rollout's name every host it reaches):
    an endpoint limited to team-a hears of it only when every host it names is team-a's, and
    its delivery is read only by someone who sees them all."""

    def key_changed_naming(*also: str) -> AuditEvent:
        return audit.record(
            action=AuditAction.HOST_KEY_CHANGED, target=teams.hosts["gpu-02"],
            data={"presented_fingerprint": "x"}, hosts=[teams.hosts[n].pk for n in also],
        )  # fmt: skip

    inside = services.deliveries_create_for_event(event=key_changed_naming("gpu-03"))
    assert sorted(d.endpoint_name for d in inside) == ["ops", "team-a-pager"]
    across = services.deliveries_create_for_event(event=key_changed_naming("gpu-03", "gpu-01"))
    assert [d.endpoint_name for d in across] == ["ops"]
    client.force_login(scoped("ann", "viewer", "team-a"))
    assert client.get(reverse("notifications:delivery", args=[across[0].pk])).status_code == 404
    assert client.get(reverse("notifications:delivery", args=[inside[0].pk])).status_code == 200
