"""Sign-in throttling (django-axes) and how long a sign-in lasts."""

from __future__ import annotations

import datetime as dt

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.urls import reverse
from django.utils import timezone

from controlplane.audit.models import AuditEvent
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def sign_in(client, username, password, address="10.0.0.7"):
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )


def test_repeated_failed_sign_ins_lock_that_name_from_that_address(client, operator):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert sign_in(client, operator.username, "wrong").status_code == 200
    locked = sign_in(client, operator.username, "wrong")
    assert locked.status_code == 429
    assert b"Too many failed sign-ins" in locked.content
    # Now even the right password is refused from that address...
    again = sign_in(client, operator.username, PASSWORD)
    assert again.status_code == 429 and "_auth_user_id" not in client.session
    # ...but not from another one, and not for another name.
    assert sign_in(client, operator.username, PASSWORD, address="10.0.0.8").status_code == 302
    failed = AuditEvent.objects.filter(action="auth.login_failed")
    assert failed.count() >= settings.AXES_FAILURE_LIMIT
    assert PASSWORD not in str(list(failed.values_list("data", flat=True)))


def test_a_successful_sign_in_resets_the_count(client, operator):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        sign_in(client, operator.username, "wrong")
    assert sign_in(client, operator.username, PASSWORD).status_code == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert sign_in(client, operator.username, "wrong").status_code == 200


def test_a_sign_in_lasts_a_working_day_and_not_past_the_browser(client, operator):
    assert sign_in(client, operator.username, PASSWORD).status_code == 302
    assert settings.SESSION_EXPIRE_AT_BROWSER_CLOSE
    session = Session.objects.get(session_key=client.session.session_key)
    lifetime = session.expire_date - timezone.now()
    assert dt.timedelta(hours=7, minutes=59) < lifetime <= dt.timedelta(hours=8)
    # Busy polling does not extend it: only the sign-in sets the expiry.
    client.get(reverse("hosts:dashboard"))
    assert Session.objects.get(pk=session.pk).expire_date == session.expire_date


def test_an_expired_sign_in_is_sent_back_to_sign_in(client, operator):
    sign_in(client, operator.username, PASSWORD)
    Session.objects.update(expire_date=timezone.now() - dt.timedelta(seconds=1))
    response = client.get(reverse("hosts:dashboard"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_an_expired_sign_in_during_htmx_polling_loads_the_sign_in_page(client, operator):
    sign_in(client, operator.username, PASSWORD)
    Session.objects.update(expire_date=timezone.now() - dt.timedelta(seconds=1))
    response = client.get(reverse("hosts:dashboard_rows"), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response["HX-Redirect"].startswith(reverse("login"))
