"""/api/v1/me/tokens/: a user's own tokens as JSON, the secret in the creating answer only."""

from __future__ import annotations

import pytest

from controlplane.api.models import APIToken
from controlplane.audit.models import AuditEvent

pytestmark = pytest.mark.django_db

TOKENS = "/api/v1/me/tokens/"


def test_a_token_is_created_with_its_secret_once_and_works(api_for, operator):
    client = api_for(operator)
    response = client.post(TOKENS, {"name": " ci-deploy ", "expires_in_days": 7}, format="json")
    assert response.status_code == 201, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["name"] == "ci-deploy" and body["state"] == "active" and body["expires_at"]
    secret = body["secret"]
    assert secret.startswith(body["prefix"] + "_")
    token = APIToken.objects.get(pk=body["id"])
    assert token.user == operator and secret not in token.digest
    listed = client.get(TOKENS).json()["results"]
    assert [t["name"] for t in listed] == ["ci-deploy", "tests"]
    assert secret not in str(listed) and not any("secret" in t for t in listed)
    fresh = api_for(None)
    fresh.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert fresh.get("/api/v1/hosts/").status_code == 200
    event = AuditEvent.objects.get(action="api_token.created", target_id=str(token.pk))
    assert secret not in str(event.data)


def test_a_token_is_revoked_by_its_owner_only(api_for, operator, viewer):
    token = api_for(operator).post(TOKENS, {"name": "ci"}, format="json").json()
    assert api_for(viewer).post(f"{TOKENS}{token['id']}/revoke/").status_code == 404
    assert api_for(viewer).get(TOKENS).json()["results"][0]["name"] == "tests"
    response = api_for(operator).post(f"{TOKENS}{token['id']}/revoke/")
    assert response.status_code == 200 and response.json()["state"] == "revoked"
    again = api_for(operator).post(f"{TOKENS}{token['id']}/revoke/")
    assert again.status_code == 200
    assert AuditEvent.objects.filter(action="api_token.revoked").count() == 1
    revoked = api_for(None)
    revoked.credentials(HTTP_AUTHORIZATION=f"Bearer {token['secret']}")
    assert revoked.get("/api/v1/hosts/").status_code == 401


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "   "}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "ci", "expires_in_days": 0}, "expires_in_days"),
        ({"name": "ci", "expires_in_days": 3651}, "expires_in_days"),
        ({"name": "ci", "expires_in_days": "soon"}, "expires_in_days"),
        ({}, "name"),
    ],
)
def test_the_token_pages_rules_apply(api_for, operator, body, field):
    response = api_for(operator).post(TOKENS, body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert APIToken.objects.filter(user=operator).count() == 1  # the client's own


def test_without_a_role_there_are_no_tokens_to_manage(api_for, outsider):
    assert api_for(outsider).get(TOKENS).status_code == 403
    assert api_for(outsider).post(TOKENS, {"name": "x"}, format="json").status_code == 403
