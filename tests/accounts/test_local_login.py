"""Local accounts stay for the break-glass administrator and the demo, as LOCAL_LOGIN says: on
(anyone with a password), admins (superusers only) or off (no password sign-in at all). The
provider's users never have a usable password; django-axes still locks out guessing."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from tests.conftest import PASSWORD
from tests.oidc.flows import PASSWORD as PROVIDER_PASSWORD
from tests.oidc.flows import sign_in

pytestmark = pytest.mark.django_db


def password_sign_in(client, username, password=PASSWORD, address="10.0.0.9"):
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )


def test_on_anyone_with_a_password_signs_in(client, operator, admin_user):
    assert password_sign_in(client, operator.username).status_code == 302
    event = AuditEvent.objects.get(action=AuditAction.AUTH_LOGIN)
    assert event.data["method"] == "password" and "actor_identity" not in event.data


def test_admins_only_the_break_glass_administrator_signs_in_with_a_password(
    client, settings, operator, admin_user
):
    settings.LOCAL_LOGIN = "admins"
    page = client.get(reverse("login")).content.decode()
    assert "for the break-glass administrator only" in page and 'name="password"' in page
    refused = password_sign_in(client, operator.username)  # the right password
    assert refused.status_code == 200 and "_auth_user_id" not in client.session
    assert AuditEvent.objects.filter(action=AuditAction.AUTH_LOGIN_FAILED).count() == 1
    assert password_sign_in(client, admin_user.username).status_code == 302


def test_switching_to_admins_ends_the_other_local_sessions(client, settings, operator):
    client.force_login(operator)
    assert client.get(reverse("hosts:dashboard")).status_code == 200
    settings.LOCAL_LOGIN = "admins"
    response = client.get(reverse("hosts:dashboard"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_off_no_password_form_and_a_posted_one_is_refused_in_words(
    client, settings, sso, admin_user
):
    settings.LOCAL_LOGIN = "off"
    page = client.get(reverse("login")).content.decode()
    assert 'name="password"' not in page and "Sign in with Test IdP" in page
    refused = password_sign_in(client, admin_user.username)
    assert refused.status_code == 403 and "_auth_user_id" not in client.session
    assert b"Password sign-in is switched off here: sign in with Test IdP." in refused.content
    # the admin's own sign-in page is refused too
    admin = client.post(
        reverse("admin:login"), {"username": admin_user.username, "password": PASSWORD}
    )
    assert "_auth_user_id" not in client.session and admin.status_code == 200


def test_a_provider_user_never_signs_in_with_a_password(client, sso, django_user_model):
    sso.account("sam", password=PROVIDER_PASSWORD)
    sign_in(client, sso, "sam")
    client.logout()
    for password in ("", PROVIDER_PASSWORD, "!"):
        assert password_sign_in(client, "sso:sam", password).status_code == 200
    # not even with one an administrator gave them: their groups are asked for at the provider
    sam = django_user_model.objects.get(username="sso:sam")
    sam.set_password(PASSWORD)
    sam.save()
    assert password_sign_in(client, "sso:sam").status_code == 200
    assert "_auth_user_id" not in client.session


def test_the_lockout_still_holds_for_the_break_glass_administrator(client, settings, admin_user):
    settings.LOCAL_LOGIN = "admins"
    for _ in range(django_settings.AXES_FAILURE_LIMIT):
        password_sign_in(client, admin_user.username, "wrong")
    locked = password_sign_in(client, admin_user.username)
    assert locked.status_code == 429 and "_auth_user_id" not in client.session
