"""The model catalog, deployments and their revisions; change requests: what a request
carries in, what a change looks like out, and refusals."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from controlplane.api.errors import RefusalSerializer
from controlplane.api.fields import RowField
from deployments import kinds
from deployments.choices import (
    ApprovalDecision,
    ChangeKind,
    ChangeStatus,
    StepStatus,
)
from deployments.drain_hooks import DEADLINE_MAX_SECONDS, DEADLINE_MIN_SECONDS
from deployments.models import (
    Approval,
    BenchmarkProfile,
    ChangeRequest,
    Deployment,
    DeploymentRevision,
    DrainHook,
    JobStep,
    ModelArtifact,
)
from deployments.unit_files.engine_flags import EngineArgRefused, check_extra_args
from hosts.models import StateSnapshot
from hosts.scope import rows_visible

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

REASON_MAX = 2000
# The request's field names here for the names the kind's rules use (kinds.request_field_errors).
_API_FIELDS = {"model": ("model_id",), "benchmark": ("benchmark", "benchmark_profile_id")}


# --- in ------------------------------------------------------------------------------------


class HostRowsInScope(serializers.Serializer):
    """Ids of hosts' rows (a deployment, a snapshot) in the body name only rows of hosts the
    caller sees (the request in the context): one outside their scope is refused exactly as an
    id that names no row ("No snapshot with id 7.")."""

    HOST_ROW_FIELDS = ("deployment_id", "snapshot_id")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        user = getattr(self.context.get("request"), "user", None)
        for name in self.HOST_ROW_FIELDS:
            field = self.fields.get(name)
            if isinstance(field, RowField):
                field.queryset = rows_visible(user, field.queryset)


class ChangeCreateSerializer(HostRowsInScope):
    deployment_id = RowField(
        queryset=Deployment.objects.select_related("host", "model", "current_revision")
    )
    kind = serializers.ChoiceField(choices=ChangeKind.choices)
    snapshot_id = RowField(
        queryset=StateSnapshot.objects.select_related("host"),
        help_text="The snapshot of the deployment's host this decision rests on; it must be "
        "ok and fresh.",
    )
    reason = serializers.CharField(max_length=REASON_MAX)
    model_id = RowField(
        queryset=ModelArtifact.objects.all(),
        required=False,
        allow_null=True,
        help_text="The model to swap to (model_swap only).",
    )
    tensor_parallel_size = serializers.IntegerField(
        min_value=1, max_value=64, required=False, allow_null=True
    )
    max_model_len = serializers.IntegerField(
        min_value=256, max_value=10_000_000, required=False, allow_null=True
    )
    extra_args = serializers.ListField(
        child=serializers.CharField(max_length=300),
        max_length=64,
        required=False,
        allow_null=True,
        help_text="Engine flags as the engine reads them: --flag, --flag=value, or --flag "
        "followed by its value (each word an item).",
    )
    environment = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=500),
        required=False,
        allow_null=True,
        help_text="The unit's Environment= variables (NAME: value); omitted keeps them.",
    )
    revision = serializers.IntegerField(
        min_value=1,
        max_value=2**31 - 1,
        required=False,
        allow_null=True,
        help_text="rollback only: the number of the revision to go back to, any one the "
        "deployment served but the current one (GET /deployments/<id>/revisions/); omitted: "
        "the one before the current one. Approval follows what it serves.",
    )
    acknowledge_busy = serializers.BooleanField(
        required=False, default=False, help_text="Go ahead although requests are in flight."
    )
    acknowledge_unknown = serializers.BooleanField(
        required=False,
        default=False,
        help_text="stop and restart only: go ahead on a partial snapshot, acknowledging the "
        "facts it could not read (listed in the 409 that asks for this).",
    )
    acknowledge_integrity = serializers.BooleanField(
        required=False,
        default=False,
        help_text="model_swap, redeploy and rollback: go ahead although the engine's integrity "
        "check is not clean (the 409 that asks for this says what it found).",
    )
    benchmark = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Run the default benchmark profile before and after the change.",
    )
    benchmark_profile_id = RowField(
        queryset=BenchmarkProfile.objects.all(),
        required=False,
        allow_null=True,
        help_text="Run this benchmark profile before and after the change (serving kinds).",
    )
    drain_hook = serializers.SlugRelatedField(
        slug_field="name",
        queryset=DrainHook.objects.all(),
        required=False,
        allow_null=True,
        help_text="Drain first: the name of an enabled drain hook (GET drain-hooks/). The job "
        "takes the host out of rotation with it, waits until no request is in flight, acts, "
        "then puts it back. Every kind but start may drain.",
    )
    drain_deadline_seconds = serializers.IntegerField(
        min_value=DEADLINE_MIN_SECONDS,
        max_value=DEADLINE_MAX_SECONDS,
        required=False,
        allow_null=True,
        help_text="With drain_hook: how long to wait for the requests in flight (default 300). "
        "If some still run then, the job fails without touching the service, unless "
        "acknowledge_busy is set.",
    )

    def validate_extra_args(self, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        try:
            check_extra_args(value)
        except EngineArgRefused as exc:
            raise serializers.ValidationError(str(exc)) from exc
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        wrong = kinds.request_field_errors(
            attrs["kind"],
            model=attrs.get("model_id") is not None,
            shaped=[n for n in kinds.SHAPING_FIELDS if attrs.get(n) is not None],
            benchmark=bool(attrs.get("benchmark") or attrs.get("benchmark_profile_id")),
            revision=attrs.get("revision") is not None,
            drain=attrs.get("drain_hook") is not None,
        )
        errors: dict[str, str] = {}
        if attrs.get("drain_deadline_seconds") is not None and attrs.get("drain_hook") is None:
            errors["drain_deadline_seconds"] = "A drain deadline needs a drain_hook to drain with."
        for name, message in wrong.items():
            fields = _API_FIELDS.get(name, (name,))
            for field in [f for f in fields if attrs.get(f)] or fields[:1]:
                errors[field] = message
        if errors:
            raise serializers.ValidationError(errors)
        number = attrs.get("revision")
        if number is not None:
            attrs["revision"] = _served_revision(attrs["deployment_id"], number)
        return attrs

    def service_arguments(self) -> dict[str, Any]:
        """The validated input, named as change_request_create takes it."""
        data = dict(self.validated_data)
        return {
            "deployment": data["deployment_id"],
            "kind": data["kind"],
            "snapshot": data["snapshot_id"],
            "reason": data["reason"],
            "model": data.get("model_id"),
            "tensor_parallel_size": data.get("tensor_parallel_size"),
            "max_model_len": data.get("max_model_len"),
            "extra_args": data.get("extra_args"),
            "environment": data.get("environment"),
            "revision": data.get("revision"),
            "acknowledge_busy": data["acknowledge_busy"],
            "acknowledge_unknown": data["acknowledge_unknown"],
            "acknowledge_integrity": data["acknowledge_integrity"],
            "benchmark": data["benchmark"],
            "benchmark_profile": data.get("benchmark_profile_id"),
            "drain_hook": data.get("drain_hook"),
            "drain_deadline_seconds": data.get("drain_deadline_seconds"),
        }


def _served_revision(deployment: Deployment, number: int) -> DeploymentRevision:
    """The deployment's revision `number`; whether a rollback may go back to it is the
    service's to say (deployments.rollback)."""
    revision = deployment.revisions.filter(number=number).first()
    if revision is None:
        message = f"{deployment.unit} on {deployment.host.name} has no revision {number}"
        raise serializers.ValidationError({"revision": message})
    return revision


class ApproveSerializer(HostRowsInScope):
    snapshot_id = RowField(
        queryset=StateSnapshot.objects.select_related("host"),
        help_text="The host's snapshot the approver reviewed; it must be ok, fresh and "
        "materially the same as the request's.",
    )
    reason = serializers.CharField(max_length=REASON_MAX)


class RejectSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=REASON_MAX)


class BreakGlassSerializer(HostRowsInScope):
    snapshot_id = RowField(queryset=StateSnapshot.objects.select_related("host"))
    reason = serializers.CharField(
        max_length=REASON_MAX, help_text="Why the two-person rule is bypassed (10+ characters)."
    )


class ChangeFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=ChangeStatus.choices, required=False)
    host = serializers.CharField(required=False, max_length=63, help_text="A host's name.")


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
