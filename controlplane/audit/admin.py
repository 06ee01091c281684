from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: the log is append-only for everyone, superusers included."""

    list_display = ("seq", "created_at", "actor", "action", "target_label", "host_label")
    list_filter = ("action",)
    search_fields = ("actor", "target_label", "host_label", "correlation_id")
    show_full_result_count = False  # no COUNT(*) over the whole log

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
