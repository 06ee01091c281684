"""`{{ cooloff|duration_words }}`: a length of time as people say it ("15 minutes", "1 hour, 30
minutes"), not as a timedelta prints ("0:15:00")."""

from __future__ import annotations

import datetime as dt

from django import template
from django.utils.timesince import timesince

register = template.Library()


@register.filter
def duration_words(value: dt.timedelta | None) -> str:
    if not isinstance(value, dt.timedelta) or value <= dt.timedelta(0):
        return ""
    if value < dt.timedelta(minutes=1):  # timesince counts in minutes at the least
        seconds = int(value.total_seconds())
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    start = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    return timesince(start, start + value, depth=2)
