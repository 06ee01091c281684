"""API tokens: hashed at rest, shown once, revoked or expired means 401, every create and
revoke audited without the secret; and the token page itself."""

from __future__ import annotations

import datetime as dt
import re

import pytest
import time_machine
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.api import services
from controlplane.api.models import APIToken
from controlplane.audit.models import AuditEvent

pytestmark = pytest.mark.django_db

PAGE = "/api/v1/tokens/"
HOSTS = "/api/v1/hosts/"


def bearer(secret: str, keyword: str = "Bearer") -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{keyword} {secret}")
    return client


def every_row_as_text() -> str:
    """Everything the database holds about tokens and audit events, as one string."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM api_apitoken")
        tokens = cursor.fetchall()
        cursor.execute("SELECT * FROM audit_auditevent")
        events = cursor.fetchall()
    return repr(tokens) + repr(events)


def created_on_the_page(client: Client, name: str = "ci-deploy", **extra) -> str:
    response = client.post(PAGE, {"name": name, **extra})
    assert response.status_code == 200, response.content
    match = re.search(r"<code data-token>(cpt_[^<]+)</code>", response.content.decode())
    assert match, "the new token is shown once"
    return match.group(1)


def test_the_page_creates_a_token_and_shows_it_once(client, operator):
    client.force_login(operator)
    secret = created_on_the_page(client)
    token = APIToken.objects.get()
    assert token.user == operator
    assert token.name == "ci-deploy"
    assert secret.startswith(token.prefix + "_")
    page = client.get(PAGE)
    body = page.content.decode()
    assert "ci-deploy" in body
    assert token.prefix in body
    assert secret not in body
    assert bearer(secret).get(HOSTS).status_code == 200


def test_the_response_that_shows_the_secret_is_never_cached(client, viewer):
    client.force_login(viewer)
    response = client.post(PAGE, {"name": "grafana"})
    assert response["Cache-Control"] == "no-store"


def test_tokens_are_hashed_at_rest(client, viewer):
    client.force_login(viewer)
    secret = created_on_the_page(client)
    text = every_row_as_text()
    assert secret not in text
    assert secret.split("_", 2)[2] not in text  # nor its random part alone
    token = APIToken.objects.get()
    assert token.digest == services.token_digest(secret)
    assert len(token.digest) == 64


def test_create_and_revoke_are_audited_without_the_secret(client, operator):
    client.force_login(operator)
    secret = created_on_the_page(client, expires_in_days="30")
    token = APIToken.objects.get()
    created = AuditEvent.objects.get(action="api_token.created")
    assert created.actor == operator.username
    assert created.target_type == "api.apitoken"
    assert created.target_id == str(token.pk)
    assert created.data["prefix"] == token.prefix
    assert created.data["name"] == "ci-deploy"
    assert created.data["expires_at"].startswith(str(token.expires_at.date()))
    client.post(f"{PAGE}{token.pk}/revoke/")
    revoked = AuditEvent.objects.get(action="api_token.revoked")
    assert revoked.actor == operator.username
    assert revoked.target_id == str(token.pk)
    assert secret not in every_row_as_text()


def test_a_revoked_token_is_a_401(client, viewer):
    client.force_login(viewer)
    secret = created_on_the_page(client)
    api = bearer(secret)
    assert api.get(HOSTS).status_code == 200
    response = client.post(f"{PAGE}{APIToken.objects.get().pk}/revoke/")
    assert response.status_code == 302
    response = api.get(HOSTS)
    assert response.status_code == 401
    assert response.json() == {
        "detail": "Invalid, expired or revoked token.",
        "code": "authentication_failed",
    }
    # Revoking again changes nothing and records nothing.
    client.post(f"{PAGE}{APIToken.objects.get().pk}/revoke/")
    assert AuditEvent.objects.filter(action="api_token.revoked").count() == 1


def test_an_expired_token_is_a_401(viewer):
    issued = services.token_create(
        user=viewer, name="short", expires_at=timezone.now() + dt.timedelta(days=1)
    )
    assert bearer(issued.secret).get(HOSTS).status_code == 200
    with time_machine.travel(timezone.now() + dt.timedelta(days=1, seconds=1)):
        assert bearer(issued.secret).get(HOSTS).status_code == 401


def test_a_deactivated_users_token_is_a_401(viewer):
    secret = services.token_create(user=viewer, name="x").secret
    viewer.is_active = False
    viewer.save()
    assert bearer(secret).get(HOSTS).status_code == 401


@pytest.mark.parametrize(
    "header",
    [
        "Bearer cpt_00000000_unknown",
        "Bearer not-even-a-token",
        "Bearer",
        "Bearer a b",
        "Token " + "x" * 5000,
        "Bearer cpt_\u00e9",
    ],
)
def test_unknown_or_malformed_tokens_are_a_401(viewer, header):
    services.token_create(user=viewer, name="x")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get(HOSTS)
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


def test_the_token_keyword_works_too(viewer):
    secret = services.token_create(user=viewer, name="x").secret
    assert bearer(secret, "Token").get(HOSTS).status_code == 200
    assert bearer(secret, "bearer").get(HOSTS).status_code == 200


def test_last_use_is_recorded_at_most_once_a_minute(viewer):
    issued = services.token_create(user=viewer, name="x")
    assert issued.token.last_used_at is None
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        bearer(issued.secret).get(HOSTS)
    issued.token.refresh_from_db()
    assert issued.token.last_used_at == start
    with time_machine.travel(start + dt.timedelta(seconds=30), tick=False):
        bearer(issued.secret).get(HOSTS)
    issued.token.refresh_from_db()
    assert issued.token.last_used_at == start
    with time_machine.travel(start + dt.timedelta(seconds=61), tick=False):
        bearer(issued.secret).get(HOSTS)
    issued.token.refresh_from_db()
    assert issued.token.last_used_at == start + dt.timedelta(seconds=61)


def test_nobody_revokes_someone_elses_token(client, viewer, operator):
    theirs = services.token_create(user=operator, name="theirs")
    client.force_login(viewer)
    assert client.post(f"{PAGE}{theirs.token.pk}/revoke/").status_code == 404
    assert bearer(theirs.secret).get(HOSTS).status_code == 200


def test_the_page_lists_only_your_own_tokens(client, viewer, operator):
    services.token_create(user=operator, name="operators-token")
    services.token_create(user=viewer, name="viewers-token")
    client.force_login(viewer)
    body = client.get(PAGE).content.decode()
    assert "viewers-token" in body
    assert "operators-token" not in body


def test_the_page_needs_a_sign_in_and_a_role(client, outsider):
    response = client.get(PAGE)
    assert response.status_code == 302
    assert response.url.startswith("/login/")
    client.force_login(outsider)
    assert client.get(PAGE).status_code == 403
    assert client.post(PAGE, {"name": "x"}).status_code == 403
    assert not APIToken.objects.exists()


def test_the_form_is_validated(client, viewer):
    client.force_login(viewer)
    for data in ({"name": ""}, {"name": "   "}, {"name": "x", "expires_in_days": "0"}):
        response = client.post(PAGE, data)
        assert response.status_code == 400
    assert not APIToken.objects.exists()


def test_creating_and_revoking_need_the_csrf_token(viewer):
    client = Client(enforce_csrf_checks=True)
    client.force_login(viewer)
    assert client.post(PAGE, {"name": "x"}).status_code == 403
    assert not APIToken.objects.exists()
    page = client.get(PAGE).content.decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert client.post(PAGE, {"name": "x", "csrfmiddlewaretoken": csrf}).status_code == 200
    token = APIToken.objects.get()
    assert client.post(f"{PAGE}{token.pk}/revoke/").status_code == 403
    token.refresh_from_db()
    assert token.revoked_at is None


def test_revoking_is_post_only(client, viewer):
    token = services.token_create(user=viewer, name="x").token
    client.force_login(viewer)
    assert client.get(f"{PAGE}{token.pk}/revoke/").status_code == 405
