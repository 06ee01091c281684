from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import AuditEvent, AuditVerification


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


@admin.register(AuditVerification)
class AuditVerificationAdmin(admin.ModelAdmin):
    """Outcomes of verify_audit and beat's verification: a record, not something to edit."""

    list_display = ("started_at", "trigger", "ok", "events", "broken_seq", "problem")
    list_filter = ("ok", "trigger")
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
