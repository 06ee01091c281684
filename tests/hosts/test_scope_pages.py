"""The host pages with host groups: a person sees, counts, finds and opens only the hosts of
their scope; a host outside it is "not found" on every page that names it, exactly as one that
does not exist; inside it, a button is offered only where its role holds."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from hosts.models import HostHealth
from tests.factories import UNIT

pytestmark = pytest.mark.django_db


def fleet_names(client, query: str = "", url: str = "hosts:dashboard") -> list[str]:
    response = client.get(reverse(url) + query)
    assert response.status_code == 200
    return re.findall(r'data-host="([^"]+)"', response.content.decode())


def test_the_fleet_lists_and_counts_only_the_hosts_in_scope(client, teams, scoped):
    client.force_login(scoped("ann", "viewer", "team-a"))
    assert sorted(fleet_names(client)) == ["gpu-02", "gpu-03"]
    assert sorted(fleet_names(client, url="hosts:dashboard_rows")) == ["gpu-02", "gpu-03"]
    assert fleet_names(client, "?q=gpu-01") == []  # searching finds no host outside it
    body = client.get(reverse("hosts:dashboard")).content.decode()
    # never judged: all unknown, and only ann's two counted
    assert re.search(r">2 unknown<", body), body
    assert ">3 unknown<" not in body
    assert "prod" not in body  # not even the other group's name is offered


def test_the_verdict_counts_are_the_scopes(client, teams, scoped):
    for host in teams.hosts.values():
        HostHealth.objects.create(host=host, verdict="failed", severity=4, since=host.created_at,
                                  computed_at=host.created_at)  # fmt: skip
    client.force_login(scoped("pia", "viewer", "prod"))
    body = client.get(reverse("hosts:dashboard")).content.decode()
    assert ">2 failed<" in body and ">0 unknown<" in body


def test_the_fleet_filters_by_group(client, teams, viewer):
    client.force_login(viewer)
    assert sorted(fleet_names(client, "?group=prod")) == ["gpu-01", "gpu-02"]
    assert sorted(fleet_names(client, "?group=team-a")) == ["gpu-02", "gpu-03"]
    assert fleet_names(client, "?group=nobody") == []
    body = client.get(reverse("hosts:dashboard")).content.decode()
    assert '<option value="prod">prod</option>' in body
    # a group name that cannot be one is left out, as the other filters that do not parse
    assert len(fleet_names(client, "?group=Not%20A%20Name")) == 3


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("hosts:detail", ["gpu-01"]),
        ("hosts:probe_status", ["gpu-01"]),
        ("hosts:gpu_series", ["gpu-01"]),
        ("hosts:journal", ["gpu-01", UNIT]),
    ],
)
def test_a_host_outside_the_scope_is_not_found(client, teams, scoped, name, args):
    client.force_login(scoped("ann", "operator", "team-a"))
    missing = client.get(reverse(name, args=["gpu-99", *args[1:]]))
    hidden = client.get(reverse(name, args=args))
    assert missing.status_code == hidden.status_code == 404
    assert missing.content == hidden.content
    assert client.get(reverse(name, args=["gpu-03", *args[1:]])).status_code != 404


def test_a_snapshot_of_a_host_outside_the_scope_is_not_found(client, teams, scoped):
    client.force_login(scoped("ann", "viewer", "team-a"))
    hidden = teams.snapshots["gpu-01"].pk
    assert client.get(reverse("hosts:snapshot", args=[hidden])).status_code == 404
    seen = teams.snapshots["gpu-03"].pk
    assert client.get(reverse("hosts:snapshot", args=[seen])).status_code == 200


def test_probing_is_not_found_outside_the_scope_and_forbidden_without_the_role(
    client, teams, scoped
):
    client.force_login(scoped("tess", "operator", "team-a", "viewer", "prod"))
    refused = client.post(reverse("hosts:probe", args=["gpu-01"]))
    assert refused.status_code == 403
    assert "Probing needs the operator or approver role on gpu-01." in refused.content.decode()
    client.force_login(scoped("ann", "operator", "team-a"))
    assert client.post(reverse("hosts:probe", args=["gpu-01"])).status_code == 404


def test_the_host_page_shows_its_groups_and_offers_what_the_role_there_allows(
    client, teams, scoped
):
    client.force_login(scoped("tess", "operator", "team-a", "viewer", "prod"))
    mine = client.get(reverse("hosts:detail", args=["gpu-03"])).content.decode()
    theirs = client.get(reverse("hosts:detail", args=["gpu-01"])).content.decode()
    assert re.search(r'id="host-groups">groups: <a [^>]*>team-a</a></p>', mine)
    assert "Probe now" in mine and "Swap model" in mine and "Run GPU diagnostic" in mine
    assert "Probe now" not in theirs and "Swap model" not in theirs
    assert "Run GPU diagnostic" not in theirs
    fleet = client.get(reverse("hosts:dashboard")).content.decode()
    rows = dict(re.findall(r'data-host="([^"]+)"(.*?)</tr>', fleet, re.S))
    assert "Probe now" in rows["gpu-03"] and "Probe now" not in rows["gpu-01"]
