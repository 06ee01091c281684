"""The history page's filter form (GET: it changes nothing, so it carries no CSRF token)."""

from __future__ import annotations

import datetime as dt

from django import forms
from django.utils import timezone

from .selectors import EventFilter

UTC_FORMATS = [
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d",
]
UTC_ATTRS = {"placeholder": "2026-12-01 14:00", "autocomplete": "off", "spellcheck": "false"}


class EventFilterForm(forms.Form):
    actor = forms.CharField(required=False, max_length=200)
    action = forms.CharField(
        required=False, max_length=100, help_text='exact, or a prefix ending in "." or "*"'
    )
    host = forms.CharField(required=False, max_length=200)
    target = forms.CharField(
        required=False, max_length=300, help_text='"type:id" (hosts.host:3) or part of a label'
    )
    # Typed in UTC, as the table shows times: a browser's date picker shows the browser's own
    # locale and clock, which is not what the label says. A link's ISO "2026-02-01T00:00" is
    # read too, and shown back as it is typed here.
    since = forms.DateTimeField(
        required=False,
        label="Since (UTC)",
        input_formats=UTC_FORMATS,
        widget=forms.DateTimeInput(format="%Y-%m-%d %H:%M", attrs=UTC_ATTRS),
        help_text="YYYY-MM-DD HH:MM, in UTC",
    )
    until = forms.DateTimeField(
        required=False,
        label="Until (UTC)",
        input_formats=UTC_FORMATS,
        widget=forms.DateTimeInput(format="%Y-%m-%d %H:%M", attrs=UTC_ATTRS),
        help_text="YYYY-MM-DD HH:MM, in UTC",
    )
    text = forms.CharField(required=False, max_length=200, label="Free text")
    correlation = forms.CharField(required=False, max_length=64, label="Correlation id")

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if since and until and since >= until:
            raise forms.ValidationError("The time range ends before it starts.")
        return data

    def to_filter(self) -> EventFilter:
        data = self.cleaned_data
        return EventFilter(
            actor=data.get("actor", "").strip(),
            action=data.get("action", "").strip(),
            host=data.get("host", "").strip(),
            target=data.get("target", "").strip(),
            since=_utc(data.get("since")),
            until=_utc(data.get("until")),
            text=data.get("text", "").strip(),
            correlation=data.get("correlation", "").strip(),
        )


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    # TIME_ZONE is UTC, so form datetimes already are; say so explicitly for the query.
    if value is None:
        return None
    return value.astimezone(dt.UTC) if timezone.is_aware(value) else value.replace(tzinfo=dt.UTC)
