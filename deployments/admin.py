from django.contrib import admin

from controlplane.admin_readonly import ReadOnlyAdmin

from .models import (
    Approval,
    BenchmarkProfile,
    ChangeRequest,
    CoherenceCheck,
    Deployment,
    DeploymentRevision,
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
    list_display = ("unit", "host", "model", "tensor_parallel_size", "port", "current_revision")
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
