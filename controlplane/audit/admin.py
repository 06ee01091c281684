from django.contrib import admin

from controlplane.admin_readonly import ReadOnlyAdmin

from .models import AuditEvent, AuditVerification


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
