from django.contrib import admin

from controlplane.admin_readonly import ReadOnlyAdmin

from .models import (
    Approval,
    BenchmarkProfile,
    ChangeRequest,
    CoherenceCheck,
    Deployment,
    DeploymentRevision,
    DrainHook,
    Evaluation,
    HostLease,
    JobStep,
    ModelArtifact,
)


@admin.register(ModelArtifact)
class ModelArtifactAdmin(admin.ModelAdmin):
    list_display = ("name", "variant", "weights_gib", "served_name", "engine", "path")
    list_filter = ("engine", "variant")
    search_fields = ("name", "served_name")


@admin.register(Deployment)
class DeploymentAdmin(admin.ModelAdmin):
    list_display = (
        "unit",
        "host",
        "model",
        "tensor_parallel_size",
        "port",
        "drain_grace_seconds",
        "current_revision",
    )
    list_filter = ("host",)
    readonly_fields = ("current_revision",)


@admin.register(DeploymentRevision)
class DeploymentRevisionAdmin(ReadOnlyAdmin):
    list_display = ("deployment", "number", "model", "unit_sha256", "created_by", "created_at")


@admin.register(ChangeRequest)
class ChangeRequestAdmin(ReadOnlyAdmin):
    list_display = ("id", "host", "kind", "status", "requested_by_name", "created_at")
    list_filter = ("status", "kind")


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = ("change", "decision", "approver_name", "created_at", "expires_at", "voided_at")


@admin.register(JobStep)
class JobStepAdmin(ReadOnlyAdmin):
    list_display = ("change", "seq", "name", "status", "exit_status", "started_at")


@admin.register(HostLease)
class HostLeaseAdmin(ReadOnlyAdmin):
    list_display = ("host", "holder", "fencing_token", "expires_at")


@admin.register(BenchmarkProfile)
class BenchmarkProfileAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "is_default",
        "concurrency_levels",
        "input_tokens",
        "output_tokens",
        "requests_per_stream",
        "duration_seconds",
    )


@admin.register(CoherenceCheck)
class CoherenceCheckAdmin(admin.ModelAdmin):
    """A model's suite, editable: each catalog model gets the default suite the first time it
    is evaluated (deployments.evaluation.coherence.suite_for)."""

    list_display = ("model", "position", "name", "kind", "enabled", "expect", "max_tokens")
    list_filter = ("model", "kind", "enabled")
    list_editable = ("position", "enabled")
    ordering = ("model", "position")


@admin.register(Evaluation)
class EvaluationAdmin(ReadOnlyAdmin):
    list_display = ("revision", "change", "phase", "kind", "passed", "started_at", "summary")
    list_filter = ("kind", "phase", "passed")


@admin.register(DrainHook)
class DrainHookAdmin(admin.ModelAdmin):
    """The list operators choose a drain hook from; each save and delete is audited
    (controlplane.audit.tracking)."""

    list_display = ("name", "kind", "enabled", "drain_shown", "undrain_shown", "timeout_seconds")
    list_filter = ("kind", "enabled")
    search_fields = ("name", "description")
    fieldsets = (
        (None, {"fields": ("name", "description", "kind", "enabled", "timeout_seconds")}),
        ("A command on the host", {"fields": ("drain_command", "undrain_command")}),
        (
            "An HTTP call, sent from the host",
            {"fields": ("drain_method", "drain_url", "undrain_method", "undrain_url")},
        ),
    )

    @admin.display(description="drains with")
    def drain_shown(self, hook: DrainHook) -> str:
        return hook.shown("drain")

    @admin.display(description="puts back with")
    def undrain_shown(self, hook: DrainHook) -> str:
        return hook.shown("undrain")
