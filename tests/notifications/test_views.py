"""Notification pages: administrators manage endpoints (audited, secret write-only), everyone
with a role reads deliveries and their attempts, nobody else gets in."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from controlplane.audit.models import AuditEvent
from controlplane.notifications import services
from controlplane.notifications.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint

from .conftest import SECRET

pytestmark = pytest.mark.django_db
SLACK_URL = "https://hooks.slack.example/services/T000/B000/XXXXSECRETPATH"
NEW_SECRET = "rotated-secret-fedcba9876543210"


@pytest.fixture
def endpoint(make_endpoint):
    return make_endpoint(SLACK_URL, events=["approval.needed", "job.finished"])


@pytest.fixture
def delivery(endpoint):
    delivery = WebhookDelivery.objects.create(
        endpoint=endpoint,
        endpoint_name=endpoint.name,
        event_type="job.finished",
        payload={"text": "Change #3 (restart of x on gpu-01) failed: SSH down", "event": "x"},
        status="retrying",
        attempts=1,
        last_response_code=500,
    )
    WebhookAttempt.objects.create(
        delivery=delivery,
        number=1,
        started_at=delivery.created_at,
        duration_ms=12,
        timestamp=1700000000,
        response_code=500,
        response_excerpt="receiver says no",
        error="HTTP 500 Internal Server Error",
        succeeded=False,
    )
    return delivery


def form(**overrides):
    data = {
        "name": "ops-slack-2",
        "url": "https://hooks.example.test/in",
        "secret": SECRET,
        "event_types": ["approval.needed", "host.unreachable"],
        "active": "on",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def all_audit_text() -> str:
    return json.dumps([e.data for e in AuditEvent.objects.all()])


# --- reading -----------------------------------------------------------------------------------


@pytest.mark.parametrize("persona", ["viewer", "operator", "approver", "admin_user"])
def test_everyone_with_a_role_sees_endpoints_deliveries_and_attempts(
    request, client, persona, delivery
):
    client.force_login(request.getfixturevalue(persona))
    page = client.get(reverse("notifications:index"))
    assert page.status_code == 200
    body = page.content.decode()
    assert "ops-slack" in body and f"#{delivery.pk}" in body and "HTTP 500" in body
    detail = client.get(reverse("notifications:delivery", args=[delivery.pk])).content.decode()
    assert "receiver says no" in detail and "HTTP 500 Internal Server Error" in detail
    assert "Change #3 (restart of x on gpu-01) failed" in detail


def test_the_full_url_is_shown_to_administrators_only(client, viewer, admin_user, endpoint):
    client.force_login(viewer)
    body = client.get(reverse("notifications:index")).content.decode()
    assert "XXXXSECRETPATH" not in body and "https://hooks.slack.example/…" in body
    assert "Add an endpoint" not in body and "Delete" not in body
    client.force_login(admin_user)
    assert "XXXXSECRETPATH" in client.get(reverse("notifications:index")).content.decode()


def test_outsiders_and_anonymous_get_nothing(client, outsider, delivery):
    urls = [reverse("notifications:index"), reverse("notifications:delivery", args=[delivery.pk])]
    for url in urls:
        assert client.get(url).status_code == 302  # to sign in
    client.force_login(outsider)
    for url in urls:
        assert client.get(url).status_code == 403


def test_an_unknown_delivery_is_404(client, viewer):
    client.force_login(viewer)
    assert client.get(reverse("notifications:delivery", args=[999])).status_code == 404


def test_the_deliveries_table_polls_only_while_one_is_open(client, viewer, delivery):
    client.force_login(viewer)
    url = reverse("notifications:index")
    partial = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert (
        partial.lstrip().startswith('<div id="deliveries"') and 'hx-trigger="every 3s"' in partial
    )
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status="succeeded")
    partial = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "hx-trigger" not in partial


def test_deliveries_filter_by_status_and_endpoint(client, viewer, delivery, make_endpoint):
    other = make_endpoint("https://other.example.test/", name="other")
    WebhookDelivery.objects.create(endpoint=other, endpoint_name="other", event_type="ping")
    client.force_login(viewer)
    page = client.get(reverse("notifications:index"), {"status": "retrying"})
    assert [d.pk for d in page.context["deliveries"]] == [delivery.pk]
    page = client.get(reverse("notifications:index"), {"endpoint": other.pk})
    assert [d.endpoint_name for d in page.context["deliveries"]] == ["other"]


# --- managing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("persona", ["viewer", "operator", "approver"])
def test_only_administrators_manage_endpoints(request, client, persona, endpoint):
    client.force_login(request.getfixturevalue(persona))
    pk = endpoint.pk
    assert client.get(reverse("notifications:endpoint_create")).status_code == 403
    assert client.post(reverse("notifications:endpoint_create"), form()).status_code == 403
    assert client.post(reverse("notifications:endpoint_edit", args=[pk]), form()).status_code == 403
    assert client.post(reverse("notifications:endpoint_active", args=[pk])).status_code == 403
    assert client.post(reverse("notifications:endpoint_delete", args=[pk])).status_code == 403
    assert client.post(reverse("notifications:endpoint_test", args=[pk])).status_code == 403
    assert list(WebhookEndpoint.objects.values_list("name", "active")) == [("ops-slack", True)]
    assert not WebhookDelivery.objects.exists()


def test_creating_stores_the_secret_encrypted_and_audits_without_it(client, admin_user):
    client.force_login(admin_user)
    response = client.post(reverse("notifications:endpoint_create"), form())
    assert response.status_code == 302
    endpoint = WebhookEndpoint.objects.get(name="ops-slack-2")
    assert endpoint.event_types == ["approval.needed", "host.unreachable"] and endpoint.active
    assert SECRET not in endpoint.secret_encrypted and endpoint.secret() == SECRET
    event = AuditEvent.objects.get(action="webhook.created")
    assert event.actor == admin_user.username and event.target_label == "ops-slack-2"
    assert event.data["after"]["url"] == "https://hooks.example.test/…"
    assert SECRET not in all_audit_text()


def test_the_form_refuses_bad_input(client, admin_user, endpoint):
    client.force_login(admin_user)
    url = reverse("notifications:endpoint_create")
    for bad in (
        form(url="ftp://files.example.test/in"),
        form(url="javascript:alert(1)"),
        form(secret=None),
        form(secret="short"),
        form(event_types=None),
        form(event_types=["nope"]),
        form(name="ops-slack"),
    ):
        response = client.post(url, bad)
        assert response.status_code == 200, bad
        assert response.context["form"].errors, bad
    assert WebhookEndpoint.objects.count() == 1


def test_the_secret_is_never_rendered_back(client, admin_user, endpoint):
    client.force_login(admin_user)
    for url in (
        reverse("notifications:index"),
        reverse("notifications:endpoint_edit", args=[endpoint.pk]),
        reverse("admin:notifications_webhookendpoint_change", args=[endpoint.pk]),
    ):
        body = client.get(url).content.decode()
        assert SECRET not in body and endpoint.secret_encrypted not in body, url


def test_editing_keeps_the_secret_unless_a_new_one_is_given(client, admin_user, endpoint):
    client.force_login(admin_user)
    url = reverse("notifications:endpoint_edit", args=[endpoint.pk])
    response = client.post(url, form(name="ops-slack", url=SLACK_URL, secret=""))
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.secret() == SECRET
    assert endpoint.event_types == ["approval.needed", "host.unreachable"]
    changed = AuditEvent.objects.get(action="webhook.changed")
    assert changed.data["fields"] == ["event_types"]

    client.post(url, form(name="ops-slack", url=SLACK_URL, secret=NEW_SECRET))
    endpoint.refresh_from_db()
    assert endpoint.secret() == NEW_SECRET
    rotated = AuditEvent.objects.filter(action="webhook.changed").order_by("-seq").first()
    assert rotated.data["fields"] == ["secret"]
    assert SECRET not in all_audit_text() and NEW_SECRET not in all_audit_text()


def test_disabling_enabling_and_deleting_are_audited(client, admin_user, endpoint, delivery):
    client.force_login(admin_user)
    client.post(reverse("notifications:endpoint_active", args=[endpoint.pk]), {"active": "0"})
    endpoint.refresh_from_db()
    assert not endpoint.active
    client.post(reverse("notifications:endpoint_active", args=[endpoint.pk]), {"active": "1"})
    endpoint.refresh_from_db()
    assert endpoint.active
    changes = AuditEvent.objects.filter(action="webhook.changed").order_by("seq")
    assert [(e.data["before"], e.data["after"]) for e in changes] == [
        ({"active": True}, {"active": False}),
        ({"active": False}, {"active": True}),
    ]
    confirm = client.get(reverse("notifications:endpoint_delete", args=[endpoint.pk]))
    assert confirm.status_code == 200 and b"Delete endpoint ops-slack?" in confirm.content
    response = client.post(reverse("notifications:endpoint_delete", args=[endpoint.pk]))
    assert response.status_code == 302
    assert not WebhookEndpoint.objects.exists()
    delivery.refresh_from_db()
    assert delivery.endpoint is None and delivery.endpoint_name == "ops-slack"
    deleted = AuditEvent.objects.get(action="webhook.deleted")
    assert deleted.target_label == "ops-slack" and deleted.data["before"]["active"] is True
    assert SECRET not in all_audit_text()


def test_changes_need_the_csrf_token(admin_user, endpoint):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    for url in (
        reverse("notifications:endpoint_create"),
        reverse("notifications:endpoint_active", args=[endpoint.pk]),
        reverse("notifications:endpoint_delete", args=[endpoint.pk]),
        reverse("notifications:endpoint_test", args=[endpoint.pk]),
    ):
        assert client.post(url, form()).status_code == 403, url
    assert WebhookEndpoint.objects.get().active


def test_send_a_test_queues_a_ping_to_that_endpoint(client, admin_user, endpoint):
    client.force_login(admin_user)
    response = client.post(reverse("notifications:endpoint_test", args=[endpoint.pk]))
    delivery = WebhookDelivery.objects.get()
    assert response.status_code == 302
    assert response.url == reverse("notifications:delivery", args=[delivery.pk])
    assert delivery.event_type == "ping" and delivery.status == "pending"
    assert delivery.payload["text"].startswith(f"{admin_user.username} sent a test notification")
    assert AuditEvent.objects.filter(action="webhook.test_sent").exists()


def test_the_admin_creates_through_the_audited_service(client, admin_user):
    client.force_login(admin_user)
    response = client.post(
        reverse("admin:notifications_webhookendpoint_add"),
        {
            "name": "from-admin",
            "url": "https://hooks.example.test/admin",
            "secret": SECRET,
            "event_types": ["drift.detected"],
            "active": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    endpoint = WebhookEndpoint.objects.get(name="from-admin")
    assert endpoint.secret() == SECRET and endpoint.event_types == ["drift.detected"]
    assert AuditEvent.objects.filter(action="webhook.created", target_label="from-admin").exists()
    assert SECRET not in all_audit_text()
    assert client.get(reverse("admin:notifications_webhookdelivery_changelist")).status_code == 200


def test_endpoint_services_refuse_invalid_rows(admin_user):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        services.endpoint_create(
            actor=admin_user, name="x", url="file:///etc/passwd", secret=SECRET, event_types=[]
        )
    with pytest.raises(ValidationError):
        services.endpoint_create(
            actor=admin_user,
            name="y",
            url="https://ok.example.test/",
            secret=SECRET,
            event_types=["made.up"],
        )
    assert not WebhookEndpoint.objects.exists()
