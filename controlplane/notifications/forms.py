"""The endpoint form. The secret is write-only: always rendered empty, kept when left empty."""

from __future__ import annotations

from typing import Any

from django import forms

from .choices import EventType
from .models import WebhookEndpoint

MIN_SECRET_LENGTH = 16


class WebhookEndpointForm(forms.Form):
    name = forms.CharField(max_length=100)
    url = forms.URLField(
        label="URL",
        max_length=500,
        assume_scheme="https",
        help_text="http or https; receives a POST of Slack-compatible JSON.",
    )
    secret = forms.CharField(
        required=False,
        min_length=MIN_SECRET_LENGTH,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=(
            f"At least {MIN_SECRET_LENGTH} characters; signs every body (HMAC-SHA256). Stored "
            "encrypted and never shown again."
        ),
    )
    event_types = forms.MultipleChoiceField(
        choices=EventType.choices, widget=forms.CheckboxSelectMultiple, label="Events"
    )
    active = forms.BooleanField(required=False, initial=True)

    def __init__(self, *args: Any, instance: WebhookEndpoint | None = None, **kwargs: Any) -> None:
        self.instance = instance
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {
                "name": instance.name,
                "url": instance.url,
                "event_types": instance.event_types,
                "active": instance.active,
            }
        super().__init__(*args, **kwargs)
        if instance is not None:
            self.fields["secret"].help_text = "Leave empty to keep the current secret."

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        taken = WebhookEndpoint.objects.filter(name=name)
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise forms.ValidationError("An endpoint with this name exists.")
        return name

    def clean_url(self) -> str:
        url: str = self.cleaned_data["url"]
        if not url.lower().startswith(("http://", "https://")):
            raise forms.ValidationError("Only http and https URLs.")
        return url

    def clean_secret(self) -> str:
        secret: str = self.cleaned_data.get("secret") or ""
        if not secret and self.instance is None:
            raise forms.ValidationError("A new endpoint needs a secret.")
        return secret
