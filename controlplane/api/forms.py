"""The token page's form."""

from __future__ import annotations

import datetime as dt

from django import forms
from django.utils import timezone


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        help_text="What uses it, e.g. ci-deploy or grafana.",
        widget=forms.TextInput(attrs={"placeholder": "ci-deploy", "autocomplete": "off"}),
    )
    expires_in_days = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=3650,
        label="Expires in (days)",
        help_text="Empty: never (revoke it when it is no longer needed).",
    )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("Give the token a name.")
        return name

    def expires_at(self) -> dt.datetime | None:
        days = self.cleaned_data.get("expires_in_days")
        return timezone.now() + dt.timedelta(days=days) if days else None
