"""A removed group removes the role at the next request that needs it: the provider is asked
again (userinfo) before every request that acts, and before a read once
OIDC_GROUPS_RECHECK_SECONDS have passed. A provider that no longer accepts the sign-in ends
the session; one that does not answer refuses the request in words. API tokens of a provider's
user act on the groups last confirmed, until those are too old."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from controlplane.accounts.models import GroupRoleMapping, Identity
from controlplane.accounts.roles import OPERATOR, VIEWER
from controlplane.api import services as token_services
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from tests.oidc.flows import PASSWORD, sign_in

pytestmark = pytest.mark.django_db

CHANGES = "/api/v1/changes/"


@pytest.fixture
def operator_at_the_provider(client, sso):
    """nina, an operator everywhere through her group gpu-ops, signed in."""
    GroupRoleMapping.objects.create(idp_group="gpu-ops", role=OPERATOR)
    GroupRoleMapping.objects.create(idp_group="readers", role=VIEWER)
    sso.account("nina", password=PASSWORD, groups=["gpu-ops", "readers"])
    assert sign_in(client, sso, "nina").status_code == 302
    return Identity.objects.select_related("user").get(subject="nina")


def request_change(client):
    """An acting request only an operator passes: an empty change request (400 once allowed)."""
    return client.post(CHANGES, {}, content_type="application/json")


def test_a_removed_group_removes_the_role_at_the_next_acting_request(
    client, sso, operator_at_the_provider
):
    assert request_change(client).status_code == 400  # an operator: the input decides
    sso.account("nina", password=PASSWORD, groups=["readers"])
    refused = request_change(client)
    assert refused.status_code == 403
    assert list(operator_at_the_provider.groups.values_list("name", flat=True)) == ["readers"]
    change = AuditEvent.objects.filter(action=AuditAction.IDENTITY_GROUPS_CHANGED).first()
    assert (
        change is not None
        and change.data["source"] == "userinfo"
        and change.data["removed"] == ["gpu-ops"]
    )
    assert change.data["before"] == ["gpu-ops", "readers"] and change.data["after"] == ["readers"]
    assert change.actor == "sso:nina"
    # and an added group adds the role, as soon
    sso.account("nina", password=PASSWORD, groups=["readers", "gpu-ops"])
    assert request_change(client).status_code == 400


def test_reads_ask_again_only_once_the_recheck_interval_has_passed(
    client, sso, settings, operator_at_the_provider
):
    settings.OIDC_GROUPS_RECHECK_SECONDS = 300
    sso.account("nina", password=PASSWORD, groups=[])
    with time_machine.travel(timezone.now() + dt.timedelta(seconds=299), tick=False):
        # still the groups confirmed at sign-in: no question asked
        assert client.get(reverse("hosts:dashboard")).status_code == 200
        assert operator_at_the_provider.groups.count() == 2
    with time_machine.travel(timezone.now() + dt.timedelta(seconds=301), tick=False):
        assert client.get(reverse("hosts:dashboard")).status_code == 403
        assert operator_at_the_provider.groups.count() == 0


def test_an_expired_sign_in_at_the_provider_ends_the_session(client, sso, operator_at_the_provider):
    sso.move_clock(3600 + 60)  # the provider's access tokens live an hour
    response = client.post(reverse("api:tokens"), {"name": "ci"})
    assert response.status_code == 302 and response["Location"] == reverse("login")
    assert "_auth_user_id" not in client.session
    ended = AuditEvent.objects.get(action=AuditAction.AUTH_SIGN_IN_ENDED)
    assert ended.actor == "sso:nina" and "no longer accepts this sign-in" in ended.data["reason"]
    assert not AuditEvent.objects.filter(action=AuditAction.AUTH_LOGOUT).exists()
    page = client.get(response["Location"])
    assert b"Your sign-in has ended" in page.content
    # signing in again at the provider (its clock still on) works
    sso.move_clock(0)
    assert sign_in(client, sso, "nina").status_code == 302


def test_a_user_removed_at_the_provider_is_signed_out_at_the_next_read_that_asks(
    client, sso, settings, operator_at_the_provider
):
    settings.OIDC_GROUPS_RECHECK_SECONDS = 0
    sso.remove_account("nina")
    response = client.get(reverse("hosts:dashboard"))
    assert response.status_code == 302
    assert response["Location"] == reverse("login") + "?next=%2F"
    # the API (signed in by session) answers in JSON
    sso.account("nina", password=PASSWORD, groups=["gpu-ops"])
    sign_in(client, sso, "nina")
    sso.remove_account("nina")
    api = request_change(client)
    assert api.status_code == 401 and api.json()["code"] == "sign_in_ended"


def test_a_userinfo_answer_about_someone_else_ends_the_sign_in(
    client, sso, operator_at_the_provider
):
    # as if the provider's token belonged to another of its users than the one signed in here
    Identity.objects.filter(pk=operator_at_the_provider.pk).update(subject="someone-else")
    assert request_change(client).status_code == 401
    assert "_auth_user_id" not in client.session
    ended = AuditEvent.objects.get(action=AuditAction.AUTH_SIGN_IN_ENDED)
    assert "about someone else" in ended.data["reason"]


def test_an_htmx_poll_of_an_ended_sign_in_loads_the_sign_in_page(
    client, sso, settings, operator_at_the_provider
):
    settings.OIDC_GROUPS_RECHECK_SECONDS = 0
    sso.remove_account("nina")
    response = client.get(reverse("hosts:dashboard_rows"), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Redirect"].startswith(reverse("login"))


def test_a_provider_that_does_not_answer_refuses_the_request_in_words(
    client, sso, settings, operator_at_the_provider
):
    closed = "http://127.0.0.1:9"  # discard: nothing listens
    settings.OIDC_ENDPOINTS = {
        "authorization_endpoint": f"{closed}/auth",
        "token_endpoint": f"{closed}/token",
        "userinfo_endpoint": f"{closed}/me",
        "jwks_uri": f"{closed}/jwks",
    }
    api = request_change(client)
    assert api.status_code == 503 and api.json()["code"] == "identity_provider_unavailable"
    page = client.post(reverse("api:tokens"), {"name": "ci"})
    assert page.status_code == 503 and b"could not be confirmed" in page.content
    assert page["Retry-After"] == "10"
    # the session stands, on the groups last confirmed, and nothing was done
    assert client.session.get("_auth_user_id") == str(operator_at_the_provider.user_id)
    assert operator_at_the_provider.groups.count() == 2


def test_signing_out_needs_no_answer_from_the_provider(client, sso, operator_at_the_provider):
    sso.remove_account("nina")
    assert client.post(reverse("logout")).status_code == 302
    assert "_auth_user_id" not in client.session
    assert AuditEvent.objects.filter(action=AuditAction.AUTH_LOGOUT).count() == 1


def test_an_api_token_acts_on_the_groups_last_confirmed_until_they_are_too_old(
    sso, settings, operator_at_the_provider
):
    settings.OIDC_API_TOKEN_GROUPS_MAX_AGE_SECONDS = 3600
    secret = token_services.token_create(user=operator_at_the_provider.user, name="ci").secret
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    # a group removed at the provider is not seen through a token (there is nothing to ask with)
    sso.account("nina", password=PASSWORD, groups=[])
    assert api.post(CHANGES, {}, format="json").status_code == 400
    with time_machine.travel(timezone.now() + dt.timedelta(seconds=3601), tick=False):
        stale = api.get("/api/v1/hosts/")
        assert stale.status_code == 401
        assert "sign in to the control plane again" in stale.json()["detail"]


def test_a_local_accounts_token_is_not_affected(operator):
    secret = token_services.token_create(user=operator, name="ci").secret
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    with time_machine.travel(timezone.now() + dt.timedelta(days=30), tick=False):
        assert api.get("/api/v1/hosts/").status_code == 200
