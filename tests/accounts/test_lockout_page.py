"""The lockout page says how long sign-in is paused in words, as people say it."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import AnonymousUser
from django.template.loader import render_to_string
from django.test import RequestFactory

from controlplane.accounts.templatetags.durations import duration_words


@pytest.mark.parametrize(
    ("length", "said"),
    [
        (dt.timedelta(minutes=15), "15 minutes"),
        (dt.timedelta(minutes=1), "1 minute"),
        (dt.timedelta(minutes=90), "1 hour, 30 minutes"),
        (dt.timedelta(days=1), "1 day"),
        (dt.timedelta(seconds=30), "30 seconds"),
        (dt.timedelta(0), ""),
    ],
)
def test_a_length_of_time_in_words(length, said):
    assert duration_words(length).replace("\xa0", " ") == said  # timesince's no-break spaces


def test_the_lockout_page_says_fifteen_minutes_not_0_15_00(db):
    request = RequestFactory().get("/login/")
    request.user = AnonymousUser()
    body = render_to_string(
        "registration/locked_out.html",
        {"failure_limit": 5, "username": "otto", "cooloff_timedelta": dt.timedelta(minutes=15)},
        request=request,
    )
    assert '<span id="cooloff">15\xa0minutes</span>' in body and "0:15:00" not in body
