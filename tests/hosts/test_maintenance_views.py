"""Maintenance where people see it and act on it: the host page's banner and forms (htmx and
plain POST), the fleet page's badge, filter and count, the change form and change page."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from deployments import services as change_services
from hosts import services
from hosts.models import Host
from tests import factories as f

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


@pytest.fixture
def host():
    host = f.make_host("gpu-01")
    f.make_deployment(host, f.make_catalog()["NVFP4"])
    return host


def later(hours: float = 4) -> str:
    """An end time as the form's datetime-local field sends it (UTC, to the minute)."""
    return (timezone.now() + dt.timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M")


def enter_url(host: Host) -> str:
    return reverse("hosts:maintenance", args=[host.name])


def leave_url(host: Host) -> str:
    return reverse("hosts:maintenance_leave", args=[host.name])


def put_in_maintenance(host: Host, user) -> Host:
    services.host_maintenance_enter(
        host=host,
        user=user,
        reason="reseating GPU 3",
        until=timezone.now() + dt.timedelta(hours=4),
    )
    return Host.objects.get(pk=host.pk)


def test_a_plain_post_enters_and_the_host_page_shows_the_banner(client, host, operator):
    client.force_login(operator)
    response = client.post(enter_url(host), {"reason": "reseating GPU 3", "until": later()})
    assert response.status_code == 302 and response.url == reverse("hosts:detail", args=["gpu-01"])
    stored = Host.objects.get(pk=host.pk)
    assert stored.in_maintenance() and stored.maintenance_by == "otto"
    page = client.get(response.url).content.decode()
    assert "gpu-01 is in maintenance until" in page  # the message
    assert 'data-in-maintenance="yes"' in page
    assert "reseating GPU 3" in page and "set by otto" in page
    assert stored.maintenance_until.strftime("%Y-%m-%d %H:%M") in page
    assert "End maintenance now" in page


def test_htmx_answers_the_card_alone(client, host, operator):
    client.force_login(operator)
    response = client.post(
        enter_url(host), {"reason": "reseating GPU 3", "until": later()}, headers=HTMX
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith("<section") and '<section id="maintenance"' in body
    assert "<html" not in body
    assert "In maintenance" in body and "gpu-01 is in maintenance until" in body
    response = client.post(leave_url(host), headers=HTMX)
    assert response.status_code == 200
    assert 'data-in-maintenance="no"' in response.content.decode()
    assert not Host.objects.get(pk=host.pk).in_maintenance()


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"reason": "", "until": later()}, "This field is required."),
        ({"reason": "\u200b\u200b", "until": later()}, "needs visible text"),
        ({"reason": "x" * 2001, "until": later()}, "at most 2000 characters"),
        ({"reason": "work", "until": ""}, "This field is required."),
        ({"reason": "work", "until": "next tuesday"}, "Enter a valid date/time."),
        ({"reason": "work", "until": later(-1)}, "has passed: give one in the future"),
        ({"reason": "work", "until": later(24 * 31)}, "Maintenance lasts at most 30 days"),
    ],
)
def test_bad_input_is_said_on_the_form_never_a_500(client, host, operator, data, words):
    client.force_login(operator)
    plain = client.post(enter_url(host), data)
    assert plain.status_code == 400
    assert words in plain.content.decode()
    assert "<details open>" in plain.content.decode()
    fragment = client.post(enter_url(host), data, headers=HTMX)
    assert fragment.status_code == 422  # app.js swaps it in place of the form
    assert words in fragment.content.decode() and "<html" not in fragment.content.decode()
    assert not Host.objects.get(pk=host.pk).in_maintenance()


def test_leaving_a_host_not_in_maintenance_is_a_409_in_words(client, host, operator):
    client.force_login(operator)
    response = client.post(leave_url(host))
    assert response.status_code == 409
    assert "gpu-01 is not in maintenance." in response.content.decode()
    response = client.post(leave_url(host), headers=HTMX)
    assert response.status_code == 422
    assert "gpu-01 is not in maintenance." in response.content.decode()


def test_who_may_and_who_may_not(client, host, viewer, approver, operator):
    for user in (viewer, approver):
        client.force_login(user)
        assert client.post(enter_url(host), {"reason": "x", "until": later()}).status_code == 403
        assert client.post(leave_url(host)).status_code == 403
        page = client.get(reverse("hosts:detail", args=[host.name])).content.decode()
        assert "Put gpu-01 in maintenance" not in page
    assert not Host.objects.get(pk=host.pk).in_maintenance()
    put_in_maintenance(host, operator)
    client.force_login(viewer)
    page = client.get(reverse("hosts:detail", args=[host.name])).content.decode()
    assert "In maintenance" in page and "reseating GPU 3" in page  # everyone reads it
    assert "End maintenance now" not in page and "Change maintenance" not in page
    client.force_login(operator)
    page = client.get(reverse("hosts:detail", args=[host.name])).content.decode()
    assert "End maintenance now" in page and "Change maintenance" in page


def test_the_maintenance_page_works_without_javascript(client, host, operator, viewer):
    client.force_login(viewer)
    response = client.get(enter_url(host))
    assert response.status_code == 200
    assert "gpu-01 is not in maintenance." in response.content.decode()
    client.force_login(operator)
    body = client.get(enter_url(host)).content.decode()
    assert 'name="csrfmiddlewaretoken"' in body and 'type="datetime-local"' in body


def test_the_fleet_page_shows_a_badge_filters_and_counts(client, host, operator, viewer):
    other = f.make_host("gpu-02")
    put_in_maintenance(host, operator)
    client.force_login(viewer)
    page = client.get(reverse("hosts:dashboard")).content.decode()
    row = page[page.index(f'id="host-row-{host.pk}"') :].split("</tr>")[0]
    assert "maintenance-badge" in row and "reseating GPU 3" in row
    other_row = page[page.index(f'id="host-row-{other.pk}"') :].split("</tr>")[0]
    assert "maintenance-badge" not in other_row
    assert ">1 in maintenance<" in page
    only = client.get(reverse("hosts:dashboard"), {"maintenance": "yes"}).content.decode()
    assert f'id="host-row-{host.pk}"' in only and f'id="host-row-{other.pk}"' not in only
    rest = client.get(reverse("hosts:dashboard"), {"maintenance": "no"}).content.decode()
    assert f'id="host-row-{host.pk}"' not in rest and f'id="host-row-{other.pk}"' in rest
    rows = client.get(reverse("hosts:dashboard_rows"), {"maintenance": "yes"}).content.decode()
    assert "maintenance-badge" in rows  # the rows' own refresh keeps the badge


def test_the_change_form_and_the_change_page_say_so(client, host, operator):
    deployment = host.deployments.get()
    put_in_maintenance(host, operator)
    client.force_login(operator)
    form = client.get(reverse("deployments:change_form", args=[deployment.pk, "restart"]))
    assert 'id="maintenance-note"' in form.content.decode()
    assert "a change a person requests still runs" in form.content.decode()
    change = change_services.change_request_create(
        user=operator, deployment=deployment, kind="restart", snapshot=f.make_snapshot(host),
        reason="after the reseat",
    )  # fmt: skip
    page = client.get(reverse("deployments:change", args=[change.pk])).content.decode()
    assert 'id="maintenance-note"' in page and "reseating GPU 3" in page
    Host.objects.filter(pk=host.pk).update(maintenance_until=timezone.now())
    page = client.get(reverse("deployments:change", args=[change.pk])).content.decode()
    assert 'id="maintenance-note"' not in page  # over at its end time, whatever beat did
