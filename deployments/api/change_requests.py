"""What a change request and a decision on one take in: the API's input serializers for
changes. Ids of hosts' rows name only rows of hosts the caller sees."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from controlplane.api.fields import RowField
from deployments import kinds
from deployments.choices import ChangeKind, ChangeStatus
from deployments.models import BenchmarkProfile, Deployment, DeploymentRevision
from hosts.models import StateSnapshot
from hosts.scope import rows_visible

from .request_fields import EngineShaping, drain_deadline_field, drain_hook_field

REASON_MAX = 2000
# The request's field names here for the names the kind's rules use (kinds.request_field_errors).
_API_FIELDS = {"model": ("model_id",), "benchmark": ("benchmark", "benchmark_profile_id")}


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


class ChangeCreateSerializer(HostRowsInScope, EngineShaping):
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
    drain_hook = drain_hook_field(
        "Drain first: the name of an enabled drain hook (GET drain-hooks/). The job takes the "
        "host out of rotation with it, waits until no request is in flight, acts, then puts it "
        "back. Every kind but start may drain."
    )
    drain_deadline_seconds = drain_deadline_field(
        "With drain_hook: how long to wait for the requests in flight (default 300). If some "
        "still run then, the job fails without touching the service, unless acknowledge_busy "
        "is set."
    )

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
