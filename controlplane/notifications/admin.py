"""Admin: endpoints through the same audited services as the pages; deliveries read-only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from controlplane.accounts.models import HostGroup
from controlplane.admin_readonly import ReadOnlyAdmin

from . import destinations, services
from .choices import EventType
from .forms import (
    HOST_GROUPS_HELP,
    MIN_SECRET_LENGTH,
    URL_HELP,
    CredentialHidingURLInput,
    destination_errors,
)
from .models import WebhookAttempt, WebhookDelivery, WebhookEndpoint


class WebhookEndpointAdminForm(forms.ModelForm):
    """The secret is write-only here too: always rendered empty, kept when left empty. The URL
    is shown without credentials and checked by the destination rule, as on the page."""

    own_hosts: tuple[str, ...] = ()  # set per request by WebhookEndpointAdmin.get_form

    secret = forms.CharField(
        required=False,
        min_length=MIN_SECRET_LENGTH,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted. Leave empty to keep the current secret.",
    )
    url = forms.URLField(
        label="URL",
        max_length=500,
        assume_scheme="https",
        widget=CredentialHidingURLInput,
        help_text=URL_HELP,
    )
    event_types = forms.MultipleChoiceField(
        choices=EventType.choices, widget=forms.CheckboxSelectMultiple
    )
    host_groups = forms.ModelMultipleChoiceField(
        queryset=HostGroup.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=HOST_GROUPS_HELP,
    )

    class Meta:
        model = WebhookEndpoint
        fields = ["name", "url", "event_types", "host_groups", "active"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        previous = self.instance.url if self.instance.pk else None
        destination_errors(self, previous_url=previous, own_hosts=self.own_hosts)
        if not data.get("secret") and not self.instance.pk:
            self.add_error("secret", "A new endpoint needs a secret.")
        elif data.get("secret"):
            # Model validation needs a value; the service stores the real thing.
            self.instance.set_secret(data["secret"])
        return data


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    form = WebhookEndpointAdminForm
    list_display = ("name", "url_display", "active", "created_at")
    list_filter = ("active", "host_groups")
    search_fields = ("name",)

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        # The names this request reached the control plane by are its own, too.
        return type(form.__name__, (form,), {"own_hosts": destinations.request_hosts(request)})

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        data = form.cleaned_data
        own_hosts = destinations.request_hosts(request)
        values = {
            "name": data["name"],
            "url": data["url"],
            "event_types": data["event_types"],
            "active": data["active"],
            "host_groups": data["host_groups"],
        }
        if change:
            saved = services.endpoint_update(
                actor=request.user,
                endpoint=obj,
                secret=data.get("secret") or None,
                own_hosts=own_hosts,
                **values,
            )
        else:
            saved = services.endpoint_create(
                actor=request.user, secret=data["secret"], own_hosts=own_hosts, **values
            )
        obj.pk = saved.pk

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # The services set the host groups (and audit them); the admin must not set them again.
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        services.endpoint_delete(actor=request.user, endpoint=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for endpoint in queryset:
            services.endpoint_delete(actor=request.user, endpoint=endpoint)


class WebhookAttemptInline(admin.TabularInline):
    model = WebhookAttempt
    extra = 0
    can_delete = False
    fields = ("number", "started_at", "duration_ms", "response_code", "error", "succeeded")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    """A record of what was sent: visible, never edited."""

    list_display = ("id", "created_at", "endpoint_name", "event_type", "status", "attempts")
    list_filter = ("status", "event_type")
    search_fields = ("endpoint_name",)
    inlines = [WebhookAttemptInline]
