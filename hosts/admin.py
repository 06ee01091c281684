from typing import Any

from django import forms
from django.contrib import admin

from controlplane.admin_readonly import ReadOnlyAdmin

from .models import Credential, Host, StateSnapshot


class CredentialForm(forms.ModelForm):
    """The key is write-only: the field is always rendered empty and never echoes a value."""

    private_key_input = forms.CharField(
        label="Private key",
        widget=forms.Textarea(attrs={"autocomplete": "off", "rows": 8}),
        required=False,
        help_text=(
            "OpenSSH or PEM private key, stored encrypted. Leave empty to keep the current key."
        ),
    )
    passphrase = forms.CharField(widget=forms.PasswordInput(render_value=False), required=False)

    class Meta:
        model = Credential
        fields = ["name"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        key = data.get("private_key_input")
        if not key and not self.instance.pk:
            self.add_error("private_key_input", "A new credential needs a private key.")
        elif key:
            try:
                self.instance.set_private_key(key, data.get("passphrase") or None)
            except forms.ValidationError as exc:
                self.add_error("private_key_input", exc)
        return data


@admin.register(Credential)
class CredentialAdmin(admin.ModelAdmin):
    form = CredentialForm
    list_display = ("name", "fingerprint", "created_at")
    readonly_fields = ("fingerprint", "public_key")


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "address",
        "port",
        "username",
        "host_key_status",
        "enabled",
        "last_probe_at",
    )
    # Which groups a host is in is kept on the host group's page (its hosts), audited per host.
    list_filter = ("enabled", "host_key_status", "groups")
    search_fields = ("name", "address", "groups__name")
    readonly_fields = (
        "host_key",
        "host_key_status",
        "presented_host_key",
        "last_probe_at",
        "last_integrity_at",
    )


@admin.register(StateSnapshot)
class StateSnapshotAdmin(ReadOnlyAdmin):
    """Snapshots are evidence: visible, never editable."""

    list_display = ("id", "host", "taken_at", "status", "trigger", "duration_ms")
    list_filter = ("status", "trigger")
