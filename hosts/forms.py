"""Forms parse and validate input; the rules live in hosts.services."""

from __future__ import annotations

from django import forms

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
    # ?page= is read by controlplane.paging, which answers any value with a page and a note.


class ProbeForm(forms.Form):
    integrity = forms.BooleanField(required=False)
    view = forms.ChoiceField(choices=[("row", "row"), ("detail", "detail")], required=False)


class HostKeyAcceptForm(forms.Form):
    fingerprint = forms.CharField(max_length=200)
    reason = forms.CharField(max_length=2000)
