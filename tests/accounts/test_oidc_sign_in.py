"""Signing in at the team's identity provider: the authorization code flow with PKCE against a
real OpenID Provider (tests/oidc), users found by issuer and subject only, groups from a claim
mapped to roles per host group."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from controlplane.accounts.backends import IDENTITY_BACKEND
from controlplane.accounts.models import GroupRoleMapping, HostGroup, Identity
from controlplane.accounts.roles import APPROVER, OPERATOR, VIEWER, user_scope
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from tests import factories as f
from tests.oidc.flows import PASSWORD, authorize_url, callback_path, query_of, sign_in
from tests.oidc.provider import CLIENT_ID, REDIRECT_URI

pytestmark = pytest.mark.django_db


def test_the_authorization_code_flow_with_pkce_signs_a_new_user_in(client, sso):
    sso.account("alice", password=PASSWORD, groups=["gpu-ops"], email="alice@example.test")
    url = authorize_url(client)
    asked = query_of(url)
    assert url.startswith(f"{sso.issuer}/auth?")
    assert asked["response_type"] == "code" and asked["client_id"] == CLIENT_ID
    assert asked["redirect_uri"] == REDIRECT_URI
    # PKCE with S256 (the provider requires it of every client), a state and a nonce
    assert asked["code_challenge_method"] == "S256" and len(asked["code_challenge"]) == 43
    assert len(asked["state"]) >= 20 and len(asked["nonce"]) >= 20
    assert set(asked["scope"].split()) == {"openid", "profile", "email", "groups"}

    callback = sso.browse_to_callback(url, login="alice", password=PASSWORD)
    assert query_of(callback)["state"] == asked["state"] and "code" in query_of(callback)
    response = client.get(callback_path(callback))

    assert response.status_code == 302 and response["Location"] == reverse("hosts:dashboard")
    assert client.session["_auth_user_backend"] == IDENTITY_BACKEND
    identity = Identity.objects.select_related("user").get(subject="alice")
    user = identity.user
    assert identity.issuer == sso.issuer and identity.groups_checked_at is not None
    assert user.username == "sso:alice" and user.email == "alice@example.test"
    assert not user.has_usable_password() and not user.is_staff and not user.is_superuser
    assert list(identity.groups.values_list("name", flat=True)) == ["gpu-ops"]
    assert client.session["_auth_user_id"] == str(user.pk)


def test_the_second_sign_in_finds_the_same_user_by_subject_whatever_the_name(client, sso):
    sso.account("bob-0001", password=PASSWORD, preferred_username="bob")
    sign_in(client, sso, "bob-0001")
    client.logout()
    sso.account("bob-0001", password=PASSWORD, preferred_username="robert", email="r@example.test")
    assert sign_in(client, sso, "bob-0001").status_code == 302
    assert User.objects.filter(identity__subject="bob-0001").count() == 1
    assert User.objects.get(identity__subject="bob-0001").username == "sso:bob"


def test_a_provider_user_named_like_the_local_admin_gets_an_account_of_their_own(
    client, sso, admin_user
):
    # Same name and same e-mail as the break-glass administrator: matched by neither.
    sso.account("x-91", password=PASSWORD, preferred_username=admin_user.username,
                email=admin_user.email)  # fmt: skip
    sso.account("x-92", password=PASSWORD, preferred_username=admin_user.username)
    assert sign_in(client, sso, "x-91").status_code == 302
    first = User.objects.get(identity__subject="x-91")
    assert first.pk != admin_user.pk and first.username == f"sso:{admin_user.username}"
    assert not first.is_superuser and not first.is_staff
    client.logout()
    assert sign_in(client, sso, "x-92").status_code == 302
    assert User.objects.get(identity__subject="x-92").username == f"sso:{admin_user.username}-2"
    admin_user.refresh_from_db()
    assert admin_user.is_superuser and not hasattr(admin_user, "identity")


def test_the_same_subject_at_another_issuer_is_someone_else(client, sso):
    other = User.objects.create_user("sso:lena")
    Identity.objects.create(user=other, issuer="https://other-idp.example", subject="lena")
    sso.account("lena", password=PASSWORD)
    assert sign_in(client, sso, "lena").status_code == 302
    mine = Identity.objects.get(issuer=sso.issuer, subject="lena").user
    assert mine.pk != other.pk and mine.username == "sso:lena-2"
    assert client.session["_auth_user_id"] == str(mine.pk)


def test_groups_map_to_roles_per_host_group(client, sso):
    team_a, prod = HostGroup.objects.create(name="team-a"), HostGroup.objects.create(name="prod")
    gpu = f.make_host("gpu-07", port=1)
    team_a.hosts.add(gpu)
    GroupRoleMapping.objects.create(idp_group="gpu-ops", role=OPERATOR, host_group=team_a)
    GroupRoleMapping.objects.create(idp_group="readers", role=VIEWER)
    GroupRoleMapping.objects.create(idp_group="prod-approvers", role=APPROVER, host_group=prod)
    sso.account("carol", password=PASSWORD, groups=["gpu-ops", "readers", "unmapped"])
    sign_in(client, sso, "carol")
    scope = user_scope(User.objects.get(identity__subject="carol"))
    assert scope.everywhere == {VIEWER}
    assert dict(scope.groups) == {team_a.pk: {OPERATOR, VIEWER}}
    assert APPROVER not in scope.roles_anywhere()
    # the pages follow: a viewer everywhere reads the fleet
    assert client.get(reverse("hosts:dashboard")).status_code == 200


def test_groups_only_in_userinfo_are_read_from_there(client, sso):
    GroupRoleMapping.objects.create(idp_group="gpu-ops", role=OPERATOR)
    sso.account("dora", password=PASSWORD, groups=["gpu-ops"], userinfo_only=("groups",))
    assert sign_in(client, sso, "dora").status_code == 302
    user = User.objects.get(identity__subject="dora")
    assert list(user.identity.groups.values_list("name", flat=True)) == ["gpu-ops"]
    assert OPERATOR in user_scope(user).everywhere


def test_junk_in_the_groups_claim_is_ignored_with_an_audit_note(client, sso):
    junk = ["", " padded", "x" * 300, 42, {"nested": True}, None]
    sso.account("erin", password=PASSWORD, groups=["gpu-ops", "gpu-ops", *junk])
    assert sign_in(client, sso, "erin").status_code == 302
    identity = Identity.objects.get(subject="erin")
    assert list(identity.groups.values_list("name", flat=True)) == ["gpu-ops"]
    note = AuditEvent.objects.get(action=AuditAction.IDENTITY_GROUPS_IGNORED)
    assert note.data["count"] == len(junk) and note.data["source"] == "sign-in"
    assert note.data["claim"] == "groups" and "42" in note.data["ignored"]
    assert all(len(shown) <= 80 for shown in note.data["ignored"])


def test_a_claim_that_is_not_a_list_gives_no_groups_and_a_note(client, sso):
    sso.account("fay", password=PASSWORD, groups={"not": "a list"})
    assert sign_in(client, sso, "fay").status_code == 302
    assert not Identity.objects.get(subject="fay").groups.exists()
    assert AuditEvent.objects.filter(action=AuditAction.IDENTITY_GROUPS_IGNORED).count() == 1


def test_the_page_asked_for_is_where_the_sign_in_ends_and_only_on_this_site(client, sso):
    sso.account("gus", password=PASSWORD)
    response = sign_in(client, sso, "gus", next_url="/changes/")
    assert response["Location"] == "/changes/"
    client.logout()
    response = sign_in(client, sso, "gus", next_url="https://evil.example/")
    assert response["Location"] == reverse("hosts:dashboard")


def test_a_user_disabled_here_is_not_signed_in(client, sso):
    sso.account("hal", password=PASSWORD)
    sign_in(client, sso, "hal")
    client.logout()
    User.objects.filter(identity__subject="hal").update(is_active=False)
    response = sign_in(client, sso, "hal")
    assert response.status_code == 403 and "_auth_user_id" not in client.session
    assert b"Your account is disabled here" in response.content


def test_the_sign_in_page_offers_the_provider(client, sso):
    page = client.get(reverse("login") + "?next=/changes/").content.decode()
    assert "Sign in with Test IdP" in page
    assert f'href="{reverse("accounts:oidc_start")}?next=/changes/"' in page
    assert sso.client_secret not in page


def test_without_a_provider_its_urls_are_not_found_and_the_page_has_no_button(client):
    assert client.get(reverse("accounts:oidc_start")).status_code == 404
    assert client.get(reverse("accounts:oidc_callback")).status_code == 404
    assert b"Sign in with" not in client.get(reverse("login")).content


def test_a_provider_that_does_not_answer_is_said_in_words_not_a_server_error(client, sso, settings):
    settings.OIDC_ISSUER = "http://127.0.0.1:9"  # discard: nothing listens
    response = client.get(reverse("accounts:oidc_start"))
    assert response.status_code == 503
    assert b"The identity provider at http://127.0.0.1:9 did not answer" in response.content
    assert AuditEvent.objects.get(action=AuditAction.AUTH_LOGIN_FAILED).data["reason"] == (
        "provider_unavailable"
    )


def test_a_discovery_document_for_another_issuer_is_refused(client, sso, settings):
    # the same provider reached under another name: its document names its own issuer
    settings.OIDC_ISSUER = sso.issuer.replace("127.0.0.1", "localhost")
    response = client.get(reverse("accounts:oidc_start"))
    assert response.status_code == 503
    page = response.content.decode()
    assert "discovery document names the issuer" in page and sso.issuer in page
