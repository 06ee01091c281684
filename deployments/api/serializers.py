"""The model catalog, deployments and their revisions; change requests: what a request
carries in, what a change looks like out, and refusals."""

from __future__ import annotations

from rest_framework import serializers

from controlplane.api.errors import RefusalSerializer
from deployments.choices import (
    ApprovalDecision,
    ChangeKind,
    ChangeStatus,
    StepStatus,
)
from deployments.models import (
    Approval,
    ChangeRequest,
    Deployment,
    DeploymentRevision,
    DrainHook,
    JobStep,
    ModelArtifact,
)

from .evaluations import EvaluationBriefSerializer, EvaluationSerializer

# --- the catalog and deployments -----------------------------------------------------------


class ModelArtifactSerializer(serializers.ModelSerializer):
    class Meta:
        model = ModelArtifact
        fields = [
            "id",
            "name",
            "variant",
            "weights_gib",
            "path",
            "served_name",
            "engine",
            "smoke_prompt",
            "smoke_expect",
            "created_at",
        ]
        read_only_fields = fields


class ModelBriefSerializer(serializers.ModelSerializer):
    class Meta:
        model = ModelArtifact
        fields = ["id", "name", "variant", "served_name", "weights_gib"]
        read_only_fields = fields


class RevisionSerializer(serializers.ModelSerializer):
    model = ModelBriefSerializer(read_only=True)
    extra_args = serializers.ListField(child=serializers.CharField(), read_only=True)
    benchmark = serializers.JSONField(read_only=True, allow_null=True)

    class Meta:
        model = DeploymentRevision
        fields = [
            "number",
            "model",
            "engine_binary",
            "tensor_parallel_size",
            "max_model_len",
            "port",
            "extra_args",
            "unit_sha256",
            "unit_text",
            "created_by",
            "created_at",
            "benchmark",
        ]
        read_only_fields = fields


class DeploymentSerializer(serializers.ModelSerializer):
    host = serializers.SlugRelatedField(slug_field="name", read_only=True)
    model = ModelBriefSerializer(read_only=True)
    extra_args = serializers.ListField(child=serializers.CharField(), read_only=True)
    current_revision = RevisionSerializer(read_only=True, allow_null=True)

    class Meta:
        model = Deployment
        fields = [
            "id",
            "host",
            "unit",
            "model",
            "engine_binary",
            "engine_python",
            "engine_dist",
            "engine_package_source",
            "tensor_parallel_size",
            "max_model_len",
            "port",
            "extra_args",
            "load_timeout_seconds",
            "current_revision",
            "created_at",
        ]
        read_only_fields = fields


# --- evaluations and benchmark profiles ---------------------------------------------------


class RevisionWithEvaluationsSerializer(RevisionSerializer):
    evaluations = EvaluationBriefSerializer(many=True, read_only=True)

    class Meta(RevisionSerializer.Meta):
        fields = [*RevisionSerializer.Meta.fields, "evaluations"]
        read_only_fields = fields


# --- change requests -----------------------------------------------------------------------

# --- out -----------------------------------------------------------------------------------


class JobStepSerializer(serializers.ModelSerializer):
    status = serializers.ChoiceField(choices=StepStatus.choices, read_only=True)
    output = serializers.CharField(source="output_shown", read_only=True)

    class Meta:
        model = JobStep
        fields = [
            "seq",
            "name",
            "status",
            "command",
            "output",
            "exit_status",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class ApprovalSerializer(serializers.ModelSerializer):
    decision = serializers.ChoiceField(choices=ApprovalDecision.choices, read_only=True)
    approver = serializers.CharField(source="approver_name", read_only=True)
    snapshot_id = serializers.IntegerField(read_only=True)

    class Meta:
        model = Approval
        fields = [
            "approver",
            "decision",
            "reason",
            "snapshot_id",
            "snapshot_digest",
            "params_digest",
            "created_at",
            "expires_at",
            "voided_at",
            "void_reason",
        ]
        read_only_fields = fields


class ChangeSerializer(serializers.ModelSerializer):
    host = serializers.SlugRelatedField(slug_field="name", read_only=True)
    deployment_id = serializers.IntegerField(read_only=True)
    unit = serializers.CharField(source="deployment.unit", read_only=True)
    kind = serializers.ChoiceField(choices=ChangeKind.choices, read_only=True)
    status = serializers.ChoiceField(choices=ChangeStatus.choices, read_only=True)
    requested_by = serializers.CharField(source="requested_by_name", read_only=True)
    snapshot_id = serializers.IntegerField(read_only=True)

    class Meta:
        model = ChangeRequest
        fields = [
            "id",
            "host",
            "deployment_id",
            "unit",
            "kind",
            "status",
            "status_reason",
            "reason",
            "requested_by",
            "needs_approval",
            "snapshot_id",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class ChangeDetailSerializer(ChangeSerializer):
    from_revision = RevisionSerializer(read_only=True, allow_null=True)
    target_revision = RevisionSerializer(read_only=True, allow_null=True)
    params = serializers.JSONField(read_only=True)
    drift_report = serializers.JSONField(
        read_only=True, help_text="Field-by-field differences, when the host drifted."
    )
    before_snapshot_id = serializers.IntegerField(read_only=True, allow_null=True)
    after_snapshot_id = serializers.IntegerField(read_only=True, allow_null=True)
    failure_snapshot_id = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="The host when verification failed, before the previous revision was restored.",
    )
    steps = JobStepSerializer(many=True, read_only=True)
    approvals = ApprovalSerializer(many=True, read_only=True)
    evaluations = EvaluationSerializer(many=True, read_only=True)

    class Meta(ChangeSerializer.Meta):
        fields = [
            *ChangeSerializer.Meta.fields,
            "from_revision",
            "target_revision",
            "params",
            "params_digest",
            "busy_acknowledged",
            "drain_state",
            "cancel_requested",
            "drift_report",
            "correlation_id",
            "before_snapshot_id",
            "after_snapshot_id",
            "failure_snapshot_id",
            "steps",
            "approvals",
            "evaluations",
        ]
        read_only_fields = fields


class DrainHookSerializer(serializers.ModelSerializer):
    """A drain hook as operators choose it: what it runs, with its placeholders."""

    drain = serializers.SerializerMethodField(help_text="What takes the host out of rotation.")
    undrain = serializers.SerializerMethodField(help_text="What puts it back.")

    class Meta:
        model = DrainHook
        fields = ["id", "name", "description", "kind", "enabled", "timeout_seconds", "drain",
                  "undrain"]  # fmt: skip
        read_only_fields = fields

    def get_drain(self, hook: DrainHook) -> str:
        return hook.shown("drain")

    def get_undrain(self, hook: DrainHook) -> str:
        return hook.shown("undrain")


class DecisionRefusalSerializer(RefusalSerializer):
    """A refused decision; with code `drifted`, also the change, now marked drifted."""

    change = ChangeDetailSerializer(required=False)
