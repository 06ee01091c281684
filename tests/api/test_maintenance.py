"""/api/v1/hosts/<name>/maintenance/: read, enter (POST) and leave (DELETE) under the same rules
as the host page; the host itself says whether it is in maintenance."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.contrib.auth.models import User

from controlplane.accounts.models import HostGroup, RoleGrant
from controlplane.accounts.roles import OPERATOR, VIEWER
from controlplane.audit.models import AuditEvent
from hosts.models import Host
from tests import factories as f

from .conftest import refusal

pytestmark = pytest.mark.django_db
NOW = dt.datetime(2026, 12, 5, 9, 0, tzinfo=dt.UTC)
URL = "/api/v1/hosts/gpu-01/maintenance/"


@pytest.fixture
def host(db) -> Host:
    return f.make_host("gpu-01")


@time_machine.travel(NOW, tick=False)
def test_enter_read_change_and_leave(api_for, host, operator, viewer) -> None:
    client = api_for(operator)
    assert api_for(viewer).get(URL).json() == {
        "in_maintenance": False, "reason": "", "since": None, "until": None, "by": "",
    }  # fmt: skip
    response = client.post(
        URL, {"reason": "reseating GPU 3", "until": "2026-12-05T13:00:00Z"}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert response.json() == {
        "in_maintenance": True,
        "reason": "reseating GPU 3",
        "since": "2026-12-05T09:00:00Z",
        "until": "2026-12-05T13:00:00Z",
        "by": "otto",
        "changed": False,
        "running_change": None,
    }
    host_json = api_for(viewer).get("/api/v1/hosts/gpu-01/").json()
    assert host_json["maintenance"]["in_maintenance"] is True
    assert host_json["maintenance"]["until"] == "2026-12-05T13:00:00Z"
    listed = api_for(viewer).get("/api/v1/hosts/").json()["results"][0]
    assert listed["maintenance"]["reason"] == "reseating GPU 3"
    again = client.post(URL, {"reason": "burn-in", "until": "2026-12-06T09:00:00"}, format="json")
    assert again.json()["changed"] is True
    assert again.json()["until"] == "2026-12-06T09:00:00Z"  # without a zone: UTC
    left = client.delete(URL)
    assert left.status_code == 200 and left.json()["in_maintenance"] is False
    actions = AuditEvent.objects.filter(action__startswith="host.maintenance")
    assert list(actions.order_by("seq").values_list("action", "actor")) == [
        ("host.maintenance_entered", "otto"),
        ("host.maintenance_changed", "otto"),
        ("host.maintenance_left", "otto"),
    ]


@time_machine.travel(NOW, tick=False)
@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({}, "reason", "This field is required."),
        ({"reason": "work"}, "until", "This field is required."),
        ({"reason": "work", "until": "soon"}, "until", "Datetime has wrong format"),
        ({"reason": "work", "until": 1765000000}, "until", "Datetime has wrong format"),
        ({"reason": ["a"], "until": "2026-12-05T13:00:00Z"}, "reason", "Not a valid string."),
        ({"reason": "x" * 2001, "until": "2026-12-05T13:00:00Z"}, "reason", "no more than 2000"),
    ],
)
def test_malformed_input_is_a_400_naming_the_field(api_for, host, operator, body, field, words):
    response = api_for(operator).post(URL, body, format="json")
    assert response.status_code == 400
    assert words in str(response.json()[field])
    assert not Host.objects.get(pk=host.pk).in_maintenance()


@time_machine.travel(NOW, tick=False)
@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"reason": " \u200b ", "until": "2026-12-05T13:00:00Z"}, "needs visible text"),
        ({"reason": "work", "until": "2026-12-05T08:59:00Z"}, "has passed"),
        ({"reason": "work", "until": "2027-02-01T00:00:00Z"}, "at most 30 days"),
    ],
)
def test_what_the_rules_refuse_is_a_400_in_words(api_for, host, operator, body, words):
    response = api_for(operator).post(URL, body, format="json")
    assert response.status_code == 400
    body = refusal(response)
    assert body["code"] == "invalid" and words in body["detail"]
    assert set(body["fields"]) <= {"reason", "until"}


def test_leaving_when_not_in_maintenance_is_a_409(api_for, host, operator):
    response = api_for(operator).delete(URL)
    assert response.status_code == 409
    assert refusal(response) == {"detail": "gpu-01 is not in maintenance.", "code": "conflict"}


def test_an_approver_or_viewer_is_refused_before_the_input_is_read(api_for, host, viewer, approver):
    for user in (viewer, approver):
        client = api_for(user)
        assert client.post(URL, {}, format="json").status_code == 403
        assert client.delete(URL).status_code == 403


def test_an_unknown_host_is_a_404(api_for, operator):
    assert api_for(operator).post("/api/v1/hosts/nope/maintenance/", {}).status_code == 404
    assert api_for(operator).get("/api/v1/hosts/bad%00name/maintenance/").status_code == 404


def test_an_operator_of_another_host_group_is_refused_before_the_input_is_read(api_for, host):
    """Bob operates team-b's hosts and reads gpu-01's group: he sees gpu-01, so he is told he
    may not (403, naming the role); Carol, of team-b alone, does not see it at all (404)."""
    elsewhere = HostGroup.objects.create(name="team-b")
    prod = HostGroup.objects.create(name="prod")
    prod.hosts.add(host)
    bob = User.objects.create_user("bob")
    RoleGrant.objects.create(user=bob, role=OPERATOR, host_group=elsewhere)
    RoleGrant.objects.create(user=bob, role=VIEWER, host_group=prod)
    response = api_for(bob).post(URL, {}, format="json")
    assert response.status_code == 403
    assert refusal(response)["detail"].endswith("needs the operator role on it.")
    assert api_for(bob).delete(URL).status_code == 403
    carol = User.objects.create_user("carol")
    RoleGrant.objects.create(user=carol, role=OPERATOR, host_group=elsewhere)
    assert api_for(carol).post(URL, {}, format="json").status_code == 404
    assert api_for(carol).delete(URL).status_code == 404
