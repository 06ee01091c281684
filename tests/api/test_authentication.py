"""How the API recognises callers: tokens first, then the session (for the browsable API),
with CSRF still enforced for session-authenticated writes; and the audit actor."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from controlplane.api import services
from controlplane.audit.models import AuditEvent
from deployments.models import ChangeRequest
from tests import factories as f

pytestmark = pytest.mark.django_db


def test_a_session_reads_the_browsable_api(client, viewer):
    client.force_login(viewer)
    response = client.get("/api/v1/hosts/", HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert "text/html" in response["Content-Type"]
    assert client.get("/api/v1/hosts/").json()["results"] == []


def test_a_session_write_needs_the_csrf_token(operator, deployment):
    snapshot = f.make_snapshot(deployment.host)
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    body = {
        "deployment_id": deployment.pk,
        "kind": "restart",
        "snapshot_id": snapshot.pk,
        "reason": "r",
    }
    response = client.post("/api/v1/changes/", body, content_type="application/json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert not ChangeRequest.objects.exists()
    page = client.get("/api/v1/tokens/").content.decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = client.post(
        "/api/v1/changes/", body, content_type="application/json", HTTP_X_CSRFTOKEN=csrf
    )
    assert response.status_code == 201, response.content


def test_a_token_write_needs_no_csrf_token(operator, deployment):
    snapshot = f.make_snapshot(deployment.host)
    secret = services.token_create(user=operator, name="ci").secret
    client = Client(enforce_csrf_checks=True)
    response = client.post(
        "/api/v1/changes/",
        {"deployment_id": deployment.pk, "kind": "restart", "snapshot_id": snapshot.pk,
         "reason": "r"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )  # fmt: skip
    assert response.status_code == 201, response.content


def test_a_bad_token_is_refused_even_with_a_session(client, viewer):
    client.force_login(viewer)
    response = client.get("/api/v1/hosts/", HTTP_AUTHORIZATION="Bearer cpt_nope_nope")
    assert response.status_code == 401


def test_events_written_through_a_token_name_its_owner_and_the_request(operator, deployment):
    snapshot = f.make_snapshot(deployment.host)
    secret = services.token_create(user=operator, name="ci").secret
    Client().post(
        "/api/v1/changes/",
        {"deployment_id": deployment.pk, "kind": "restart", "snapshot_id": snapshot.pk,
         "reason": "r"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
        HTTP_USER_AGENT="deploy-bot/1.0",
        REMOTE_ADDR="10.1.2.3",
    )  # fmt: skip
    event = AuditEvent.objects.get(action="change.requested")
    assert (event.actor, event.actor_user_id) == (operator.username, operator.pk)
    assert event.ip == "10.1.2.3"
    assert event.user_agent == "deploy-bot/1.0"
    assert event.correlation_id == ChangeRequest.objects.get().correlation_id


def test_the_root_lists_the_collections(api_for, viewer):
    body = api_for(viewer).get("/api/v1/").json()
    assert body["hosts"] == "http://testserver/api/v1/hosts/"
    assert body["changes"] == "http://testserver/api/v1/changes/"
    assert body["schema"] == "http://testserver/api/v1/schema/"


def test_an_unknown_format_is_a_400(api_for, viewer):
    response = api_for(viewer).get("/api/v1/hosts/", {"format": "xml"})
    assert response.status_code == 400
    assert set(response.json()) == {"format"}


def test_the_browsable_api_renders_every_page(client, admin_user, deployment):
    """A person signed in can browse every read, and see the write forms, without errors."""
    snapshot = f.make_snapshot(deployment.host)
    change = ChangeRequest.objects.none()
    secret = services.token_create(user=admin_user, name="x").secret
    Client().post(
        "/api/v1/changes/",
        {"deployment_id": deployment.pk, "kind": "restart", "snapshot_id": snapshot.pk,
         "reason": "r"},
        content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}",
    )  # fmt: skip
    change = ChangeRequest.objects.get()
    event = AuditEvent.objects.first()
    client.force_login(admin_user)
    for path in (
        "/api/v1/",
        "/api/v1/hosts/",
        "/api/v1/hosts/gpu-01/",
        "/api/v1/hosts/gpu-01/snapshots/",
        "/api/v1/hosts/gpu-01/snapshots/latest/",
        f"/api/v1/snapshots/{snapshot.pk}/",
        "/api/v1/deployments/",
        f"/api/v1/deployments/{deployment.pk}/",
        "/api/v1/models/",
        f"/api/v1/models/{deployment.model_id}/",
        "/api/v1/changes/",
        f"/api/v1/changes/{change.pk}/",
        f"/api/v1/changes/{change.pk}/approve/",
        f"/api/v1/changes/{change.pk}/cancel/",
        "/api/v1/audit/events/",
        f"/api/v1/audit/events/{event.seq}/",
    ):
        response = client.get(path, HTTP_ACCEPT="text/html")
        assert response.status_code in (200, 405), (path, response.status_code)
        assert "text/html" in response["Content-Type"], path
