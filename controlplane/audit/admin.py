from django.contrib import admin

from controlplane.admin_readonly import ReadOnlyAdmin

from .models import AuditEvent, AuditStreamCursor, AuditVerification


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    """Read-only: the log is append-only for everyone, superusers included."""

    list_display = ("seq", "created_at", "actor", "action", "target_label", "host_label")
    list_filter = ("action",)
    search_fields = ("actor", "target_label", "host_label", "correlation_id")


@admin.register(AuditVerification)
class AuditVerificationAdmin(ReadOnlyAdmin):
    """Outcomes of verify_audit and beat's verification: a record, not something to edit."""

    list_display = ("started_at", "trigger", "ok", "events", "broken_seq", "problem")
    list_filter = ("ok", "trigger")


@admin.register(AuditStreamCursor)
class AuditStreamCursorAdmin(ReadOnlyAdmin):
    """How far each SIEM destination has got. Moved only by sending, or by `manage.py
    audit_stream replay` (audited): never by hand, which could skip events unnoticed."""

    list_display = (
        "name", "kind", "delivered_seq", "sent_seq", "attempts", "last_error", "last_success_at",
        "removed_at",
    )  # fmt: skip
