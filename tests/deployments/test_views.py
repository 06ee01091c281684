"""Change pages: the rules show in place, each persona gets what it may do and no more."""

from __future__ import annotations

import re

import pytest
from django.template.defaultfilters import date as date_filter
from django.urls import reverse
from django.utils import timezone

from deployments import services
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest
from tests import factories as f

pytestmark = pytest.mark.django_db


def form_url(deployment, kind):
    return reverse("deployments:change_form", args=[deployment.pk, kind])


def test_the_form_shows_the_snapshot_it_decides_on(client, operator, deployment):
    snapshot = f.make_snapshot(deployment.host, age=7)
    client.force_login(operator)
    body = client.get(form_url(deployment, "restart")).content.decode()
    assert f'name="snapshot_id" value="{snapshot.pk}"' in body
    age = re.search(r'data-age="(\d+)"', body)
    assert age is not None and 7 <= int(age.group(1)) <= 60  # 7 s old when made, then the setup
    assert "kimi-k2.5" in body
    assert body.count("97887 MiB") == 8


def test_a_stale_snapshot_disables_the_button_and_offers_a_probe(client, operator, deployment):
    f.make_snapshot(deployment.host, age=900)
    client.force_login(operator)
    body = client.get(form_url(deployment, "restart")).content.decode()
    assert "the limit is 300 s" in body
    assert "Probe and review again" in body
    assert "disabled" in body


def test_submitting_a_stale_snapshot_is_refused_in_place(client, operator, deployment):
    snapshot = f.make_snapshot(deployment.host, age=900)
    client.force_login(operator)
    response = client.post(
        form_url(deployment, "restart"), {"snapshot_id": snapshot.pk, "reason": "patch"}
    )
    assert response.status_code == 409
    assert "the limit is 300 s" in response.content.decode()
    assert not ChangeRequest.objects.exists()


def test_a_refusal_the_page_already_shows_is_not_said_twice(client, operator, deployment):
    snapshot = f.make_snapshot(deployment.host, age=900)
    client.force_login(operator)
    shown = client.get(form_url(deployment, "restart")).content.decode()
    refused = client.post(
        form_url(deployment, "restart"), {"snapshot_id": snapshot.pk, "reason": "patch"}
    ).content.decode()
    words = re.search(r"snapshot #\d+ is \d+ s old", shown)
    assert words is not None
    # The snapshot card says it on both pages; the refusal adds no second copy above the form.
    assert refused.count(words.group(0)[:12]) == shown.count(words.group(0)[:12])


def test_a_refusal_no_card_shows_is_said_above_the_form(client, operator, deployment, catalog):
    snapshot = f.make_snapshot(deployment.host)
    services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", snapshot=snapshot,
        reason="first", model=catalog["INT4"],
    )  # fmt: skip
    client.force_login(operator)
    response = client.post(
        form_url(deployment, "restart"), {"snapshot_id": snapshot.pk, "reason": "second"}
    )
    assert response.status_code == 409
    assert "one open request per deployment" in response.content.decode()


def test_a_fresh_request_redirects_to_its_change_page(client, operator, deployment):
    snapshot = f.make_snapshot(deployment.host)
    client.force_login(operator)
    response = client.post(
        form_url(deployment, "restart"), {"snapshot_id": snapshot.pk, "reason": "patch"}
    )
    change = ChangeRequest.objects.get()
    assert response.status_code == 302
    assert response.url == reverse("deployments:change", args=[change.pk])
    assert change.requested_by == operator


def test_a_swap_to_a_model_that_cannot_fit_is_refused_in_place(
    client, operator, deployment, catalog
):
    snapshot = f.make_snapshot(deployment.host)
    client.force_login(operator)
    response = client.post(
        form_url(deployment, "model_swap"),
        {"snapshot_id": snapshot.pk, "reason": "try FP8", "model": catalog["FP8"].pk},
    )
    assert response.status_code == 409
    assert "does not fit" in response.content.decode()


def test_hostile_engine_arguments_are_refused_by_the_form(client, operator, deployment):
    snapshot = f.make_snapshot(deployment.host)
    client.force_login(operator)
    response = client.post(
        form_url(deployment, "redeploy"),
        {"snapshot_id": snapshot.pk, "reason": "x", "extra_args": "--x=$(reboot)"},
    )
    assert response.status_code == 400
    assert "is not allowed" in response.content.decode()
    assert not ChangeRequest.objects.exists()


@pytest.mark.parametrize("kind", ["restart", "model_swap"])
def test_viewers_and_approvers_cannot_open_change_forms(client, viewer, approver, deployment, kind):
    for user in (viewer, approver):
        client.force_login(user)
        assert client.get(form_url(deployment, kind)).status_code == 403


def test_an_unknown_kind_is_a_404(client, operator, deployment):
    client.force_login(operator)
    assert client.get(form_url(deployment, "reboot")).status_code == 404


def _swap(operator, deployment, catalog):
    return services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap",
        snapshot=f.make_snapshot(deployment.host), reason="faster", model=catalog["INT4"],
    )  # fmt: skip


def test_the_approvals_queue_lists_waiting_requests_oldest_first(client, viewer, operator, catalog):
    first = _swap(operator, f.make_deployment(f.make_host("gpu-01"), catalog["NVFP4"]), catalog)
    second = _swap(operator, f.make_deployment(f.make_host("gpu-02"), catalog["NVFP4"]), catalog)
    client.force_login(viewer)
    body = client.get(reverse("deployments:approvals")).content.decode()
    assert body.index(f"#{first.pk}<") < body.index(f"#{second.pk}<")


def test_an_approver_approves_on_the_snapshot_shown(
    client, operator, approver, deployment, catalog
):
    change = _swap(operator, deployment, catalog)
    latest = f.make_snapshot(deployment.host)
    client.force_login(approver)
    page = client.get(reverse("deployments:change", args=[change.pk])).content.decode()
    assert f'name="snapshot_id" value="{latest.pk}"' in page
    client.post(
        reverse("deployments:approve", args=[change.pk]),
        {"snapshot_id": latest.pk, "reason": "fits"},
    )
    change.refresh_from_db()
    assert change.status == ChangeStatus.QUEUED
    assert change.approvals.get().snapshot == latest


def _approvals_table(client, change):
    page = client.get(reverse("deployments:change", args=[change.pk])).content.decode()
    return page.split("<h2>Approvals</h2>", 1)[1].split("</section>", 1)[0]


def test_the_change_page_shows_when_an_approval_expires(
    client, operator, approver, deployment, catalog
):
    change = _swap(operator, deployment, catalog)
    services.change_request_approve(
        change=change, approver=approver, snapshot=f.make_snapshot(deployment.host), reason="fits"
    )
    expires = timezone.localtime(change.approvals.get().expires_at)
    client.force_login(approver)
    assert f"<td>{date_filter(expires, 'H:i:s')}</td>" in _approvals_table(client, change)


def test_the_change_page_shows_no_expiry_for_a_rejection(
    client, operator, approver, deployment, catalog
):
    change = _swap(operator, deployment, catalog)
    services.change_request_reject(change=change, approver=approver, reason="not this week")
    client.force_login(approver)
    table = _approvals_table(client, change)
    row = re.search(r"<tr><td>rejected.*?</tr>", table, re.S)
    assert row is not None, table
    assert '<span class="muted" title="a rejection never expires">—</span>' in row.group(0)
    assert not re.search(r"\d\d:\d\d:\d\d</td><td>not this week", row.group(0))


def test_a_viewer_cannot_approve_and_nothing_changes(client, operator, viewer, deployment, catalog):
    change = _swap(operator, deployment, catalog)
    client.force_login(viewer)
    client.post(
        reverse("deployments:approve", args=[change.pk]),
        {"snapshot_id": f.make_snapshot(deployment.host).pk},
    )
    change.refresh_from_db()
    assert change.status == ChangeStatus.PENDING_APPROVAL
    assert not change.approvals.exists()


def test_outsiders_cannot_see_change_pages(client, outsider, operator, deployment, catalog):
    change = _swap(operator, deployment, catalog)
    client.force_login(outsider)
    for url in (
        reverse("deployments:change", args=[change.pk]),
        reverse("deployments:approvals"),
        reverse("deployments:changes"),
    ):
        assert client.get(url).status_code == 403
    assert client.post(reverse("deployments:approve", args=[change.pk])).status_code == 403


def test_the_requester_can_cancel_a_waiting_request(client, operator, deployment, catalog):
    change = _swap(operator, deployment, catalog)
    client.force_login(operator)
    client.post(reverse("deployments:cancel", args=[change.pk]))
    change.refresh_from_db()
    assert change.status == ChangeStatus.CANCELLED
