"""The audit header says how far the last verification reached and how many events came after
it, and "Verify now" walks the chain for the page: read-only, as the API's verify (nothing
stored, no event). The time filters are typed in UTC, as their labels say."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from controlplane.audit import services
from controlplane.audit.models import AuditEvent, AuditVerification

from .conftest import make_events, tamper

pytestmark = pytest.mark.django_db


def header(client: Client, url: str, **headers: str) -> str:
    body = client.get(url, headers=headers).content.decode()
    start = body.index('id="audit-integrity"')
    return body[start : body.index("</section>", start)]


def test_the_header_says_how_many_events_came_after_the_last_verification(
    client: Client, viewer: User
) -> None:
    client.force_login(viewer)
    make_events(3)
    services.verification_run(trigger="beat")
    assert "up to the newest event" in header(client, reverse("audit:history"))
    make_events(45)
    said = header(client, reverse("audit:history"))
    behind = '<span class="warning" id="audit-behind">45 events recorded since, not yet verified'
    assert behind in said
    assert 'action="/audit/verify/"' in said and "Verify now" in said


def test_verify_now_is_current_and_changes_nothing(client: Client, viewer: User) -> None:
    client.force_login(viewer)
    make_events(5)
    services.verification_run(trigger="beat")
    make_events(7)
    stored, events = AuditVerification.objects.count(), AuditEvent.objects.count()
    head = AuditEvent.objects.order_by("-seq").first().seq

    fragment = header(client, reverse("audit:verify"), **{"HX-Request": "true"})
    assert f"up to #{head}," in fragment and "just now, for this page" in fragment
    assert "up to the newest event" in fragment
    page = client.get(reverse("audit:verify")).content.decode()  # without htmx: the page
    assert 'id="audit-results"' in page and f"up to #{head}," in page
    assert (AuditVerification.objects.count(), AuditEvent.objects.count()) == (stored, events)

    tamper("DELETE FROM audit_auditevent WHERE seq = 3")
    broken = header(client, reverse("audit:verify"), **{"HX-Request": "true"})
    assert "failed verification" in broken and "at #3 (gap)" in broken


def test_the_time_filters_are_typed_in_utc(client: Client, viewer: User) -> None:
    client.force_login(viewer)
    body = client.get(reverse("audit:history"), {"since": "2026-02-01 00:00"}).content.decode()
    assert 'type="datetime-local"' not in body  # a picker shows the browser's locale and clock
    since = re.search(r'<input type="text" name="since"[^>]*>', body).group(0)
    assert 'value="2026-02-01 00:00"' in since and 'placeholder="2026-12-01 14:00"' in since
    assert "Since (UTC)" in body and "Until (UTC)" in body and "UTC now." in body
    assert "Since (UTC): " not in body  # no error: the typed time is read
    link = client.get(reverse("audit:history"), {"since": "2026-02-01T00:00"})  # an ISO link
    assert "Since (UTC): " not in link.content.decode()
