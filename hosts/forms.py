"""Forms parse and validate input; the rules live in hosts.services."""

from __future__ import annotations

import datetime as dt

from django import forms
from django.utils import timezone

from controlplane.accounts.models import validate_host_group_name

from .choices import Verdict

SORTS = {"verdict": "worst first", "name": "name", "age": "oldest snapshot first"}


class FleetFilterForm(forms.Form):
    """The fleet page's filters (GET: it changes nothing, so it carries no CSRF token)."""

    verdict = forms.ChoiceField(choices=[("", "any verdict"), *Verdict.choices], required=False)
    q = forms.CharField(required=False, max_length=63, label="host name contains")
    group = forms.CharField(
        required=False, max_length=63, label="host group", validators=[validate_host_group_name]
    )
    sort = forms.ChoiceField(choices=list(SORTS.items()), required=False)
    maintenance = forms.ChoiceField(
        choices=[("", "either"), ("yes", "in maintenance"), ("no", "not in maintenance")],
        required=False,
    )
    # ?page= is read by controlplane.paging, which answers any value with a page and a note.


class ProbeForm(forms.Form):
    integrity = forms.BooleanField(required=False)
    view = forms.ChoiceField(choices=[("row", "row"), ("detail", "detail")], required=False)


class HostKeyAcceptForm(forms.Form):
    fingerprint = forms.CharField(max_length=200)
    reason = forms.CharField(max_length=2000)


# The end time a maintenance form offers first: what a typical piece of work on a host takes.
DEFAULT_MAINTENANCE = dt.timedelta(hours=4)
DATETIME_LOCAL = "%Y-%m-%dT%H:%M"


class MaintenanceForm(forms.Form):
    """Entering (or changing) a host's maintenance. The end time is UTC, as every page shows
    times; the rules (a future end, at most hosts.services.MAINTENANCE_MAX away, a reason
    with words) are the service's."""

    reason = forms.CharField(
        max_length=2000,
        widget=forms.TextInput(attrs={"placeholder": "what you are doing (e.g. reseating GPU 3)"}),
    )
    until = forms.DateTimeField(
        label="until (UTC)",
        input_formats=[DATETIME_LOCAL, "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=DATETIME_LOCAL),
    )

    @classmethod
    def offered(cls, now: dt.datetime | None = None) -> MaintenanceForm:
        """An empty form whose end time is DEFAULT_MAINTENANCE from now, to the minute."""
        now = now or timezone.now()
        until = (now + DEFAULT_MAINTENANCE).replace(second=0, microsecond=0)
        return cls(initial={"until": until})
