"""The endpoint form. The secret is write-only: always rendered empty, kept when left empty.
The URL is never rendered with credentials in it, and must be a place a webhook may go."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms

from controlplane.accounts.models import HostGroup

from . import destinations
from .choices import EventType
from .models import WebhookEndpoint

MIN_SECRET_LENGTH = 16
URL_HELP = (
    "http or https; receives a POST of Slack-compatible JSON. Not the control plane's own "
    "network (loopback, private, link-local addresses and its own names) unless "
    "WEBHOOK_ALLOWED_NETWORKS allows it, and no user name or password in it."
)


HOST_GROUPS_HELP = (
    "Only events about hosts in these groups, and events about no host. None ticked: every host."
)


class CredentialHidingURLInput(forms.URLInput):
    """A URL input that shows a user name and password in the URL as `***`, whether the value
    came from the database or from what was just posted: they are never rendered back."""

    def format_value(self, value: Any) -> str | None:
        shown = super().format_value(value)
        return destinations.url_without_credentials(shown) if shown else shown


def destination_errors(
    form: forms.BaseForm, *, previous_url: str | None, own_hosts: Iterable[str]
) -> None:
    """Put the destination rule's refusal of the form's URL on its URL field, in its words."""
    url = form.cleaned_data.get("url")
    active = bool(form.cleaned_data.get("active"))
    if not url or not destinations.check_needed(url=url, active=active, previous_url=previous_url):
        return
    try:
        destinations.destination_check(url, own_hosts=own_hosts)
    except destinations.DestinationRefused as exc:
        form.add_error("url", exc.message)


class WebhookEndpointForm(forms.Form):
    name = forms.CharField(max_length=100)
    url = forms.URLField(
        label="URL",
        max_length=500,
        assume_scheme="https",
        widget=CredentialHidingURLInput,
        help_text=URL_HELP,
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
    host_groups = forms.ModelMultipleChoiceField(
        queryset=HostGroup.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Host groups",
        help_text=HOST_GROUPS_HELP,
    )
    active = forms.BooleanField(required=False, initial=True)

    def __init__(
        self,
        *args: Any,
        instance: WebhookEndpoint | None = None,
        own_hosts: Iterable[str] = (),
        **kwargs: Any,
    ) -> None:
        self.instance = instance
        self.own_hosts = tuple(own_hosts)
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {
                "name": instance.name,
                "url": instance.url,
                "event_types": instance.event_types,
                "host_groups": list(instance.host_groups.all()),
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

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        previous = self.instance.url if self.instance is not None else None
        destination_errors(self, previous_url=previous, own_hosts=self.own_hosts)
        return data
