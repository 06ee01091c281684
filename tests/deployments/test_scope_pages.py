"""The change pages with host groups: the change list and the approvals queue show only the
changes of hosts in a person's scope; a deployment or change of a host outside it is "not
found" on every page that names it (form, pre-flight, revisions, change page, decisions), and
inside it a decision needs its role on that host."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from deployments import services
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest

pytestmark = pytest.mark.django_db


def swap(user, teams, name):
    return services.change_request_create(
        user=user, deployment=teams.deployments[name], kind="model_swap",
        snapshot=teams.snapshots[name], reason="INT4 serves more tokens per second",
        model=teams.catalog["INT4"],
    )  # fmt: skip


@pytest.fixture
def changes(teams, operator):
    return {name: swap(operator, teams, name) for name in ("gpu-01", "gpu-03")}


def test_the_change_list_and_the_approvals_queue_show_the_scopes_changes(client, changes, scoped):
    client.force_login(scoped("ann", "approver", "team-a"))
    listed = client.get(reverse("deployments:changes")).content.decode()
    assert re.findall(r'href="/changes/(\d+)/"', listed) == [str(changes["gpu-03"].pk)]
    queue = client.get(reverse("deployments:approvals")).content.decode()
    assert re.findall(r'href="/changes/(\d+)/"', queue) == [str(changes["gpu-03"].pk)]
    assert 'id="approvals-count">1 waiting' in queue


@pytest.mark.parametrize(
    ("name", "method", "row"),
    [
        ("deployments:change", "get", "change"),
        ("deployments:approve", "post", "change"),
        ("deployments:reject", "post", "change"),
        ("deployments:cancel", "post", "change"),
        ("deployments:revisions", "get", "deployment"),
    ],
)
def test_a_change_or_deployment_outside_the_scope_is_not_found(
    client, teams, changes, scoped, name, method, row
):
    client.force_login(scoped("ann", "operator", "team-a", "approver", "team-a"))
    hidden = changes["gpu-01"] if row == "change" else teams.deployments["gpu-01"]
    call = getattr(client, method)
    got = call(reverse(name, args=[hidden.pk]), {"reason": "x"})
    absent = call(reverse(name, args=[424242]), {"reason": "x"})
    assert got.status_code == absent.status_code == 404
    assert got.content == absent.content  # the same page: nothing says it exists
    assert ChangeRequest.objects.get(pk=changes["gpu-01"].pk).status == (
        ChangeStatus.PENDING_APPROVAL
    )


@pytest.mark.parametrize("name", ["deployments:change_form", "deployments:change_preflight"])
def test_the_change_form_of_a_host_outside_the_scope_is_not_found(client, teams, scoped, name):
    client.force_login(scoped("tess", "operator", "team-a", "viewer", "prod"))
    url = reverse(name, args=[teams.deployments["gpu-01"].pk, "restart"])
    assert client.post(url, {"reason": "x"}).status_code == 403  # seen, not an operator there
    client.force_login(scoped("ann", "operator", "team-a"))
    assert client.post(url, {"reason": "x"}).status_code == 404
    mine = reverse(name, args=[teams.deployments["gpu-03"].pk, "restart"])
    assert client.post(mine, {"reason": "x"}).status_code in (200, 400)


def test_a_change_form_cannot_rest_on_a_snapshot_of_a_host_outside_the_scope(client, teams, scoped):
    client.force_login(scoped("ann", "operator", "team-a"))
    url = reverse("deployments:change_form", args=[teams.deployments["gpu-03"].pk, "restart"])
    response = client.post(url, {"snapshot_id": teams.snapshots["gpu-01"].pk, "reason": "x"})
    body = response.content.decode()
    assert response.status_code == 400 and "That snapshot does not exist." in body
    assert "gpu-01" not in body


def test_deciding_needs_the_approver_role_on_the_changes_host(client, teams, changes, scoped):
    client.force_login(scoped("pia", "approver", "team-a", "viewer", "prod"))
    hidden = changes["gpu-01"]
    page = client.get(reverse("deployments:change", args=[hidden.pk])).content.decode()
    assert "Approve</button>" not in page  # seen, not hers to approve
    refused = client.post(
        reverse("deployments:approve", args=[hidden.pk]),
        {"reason": "ok", "snapshot_id": teams.snapshots["gpu-01"].pk},
    )
    assert refused.status_code == 403
    assert "Approving a change needs the approver role on gpu-01." in refused.content.decode()
    # refused before the form is even read: not "the form was not valid"
    assert client.post(reverse("deployments:approve", args=[hidden.pk])).status_code == 403
    assert client.post(reverse("deployments:reject", args=[hidden.pk])).status_code == 403
    mine = client.get(reverse("deployments:change", args=[changes["gpu-03"].pk])).content
    assert b"Approve</button>" in mine
    approved = client.post(
        reverse("deployments:approve", args=[changes["gpu-03"].pk]),
        {"reason": "ok", "snapshot_id": teams.snapshots["gpu-03"].pk},
    )
    assert approved.status_code == 302
    assert ChangeRequest.objects.get(pk=changes["gpu-03"].pk).status == ChangeStatus.QUEUED
