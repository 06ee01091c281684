"""/api/v1/audit/verify/: the verification `verify_audit` runs, read-only, for any role."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.api import services as token_services
from controlplane.audit.models import AuditVerification

from .conftest import make_events, tamper

pytestmark = pytest.mark.django_db

VERIFY = "/api/v1/audit/verify/"


def client_of(user) -> APIClient:
    client = APIClient()
    secret = token_services.token_create(user=user, name="verify").secret
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def test_an_intact_log_verifies_with_its_head(viewer):
    make_events(5)
    body = client_of(viewer).get(VERIFY).json()
    assert body["ok"] is True and body["broken_seq"] is None
    assert body["events"] == body["head_seq"] >= 5
    assert body["summary"].startswith("OK: ")
    assert not AuditVerification.objects.exists()  # read-only: nothing recorded


def test_an_altered_event_is_named(viewer):
    events = make_events(5)
    client = client_of(viewer)
    tamper("UPDATE audit_auditevent SET actor = %s WHERE seq = %s", ["mallory", events[2].seq])
    response = client.get(VERIFY)
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is False and body["broken_seq"] == events[2].seq
    assert f"BROKEN at #{events[2].seq}" in body["summary"]


def test_anonymous_and_role_less_callers_are_refused(outsider):
    assert APIClient().get(VERIFY).status_code == 401
    assert client_of(outsider).get(VERIFY).status_code == 403
