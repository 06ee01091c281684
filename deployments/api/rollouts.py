"""Rollouts in the JSON API: request, read (with every host's state), approve, reject, pause,
resume, abort. The same services as the pages, so the same rules: roles on every host, the
two-person rule, one approval bound to the parameters and to what each host serves."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.accounts.models import HostGroup
from controlplane.accounts.roles import OPERATOR
from controlplane.api.errors import RefusalSerializer
from controlplane.api.fields import RowField
from controlplane.api.pagination import NewestIdPagination
from controlplane.api.views.base import APIView, row_or_404
from deployments.models import BenchmarkProfile, Rollout, RolloutHost
from deployments.rollouts import access, decisions, requests, selectors
from deployments.rollouts.choices import ROLLOUT_KINDS, RolloutStatus, WaveUnit
from hosts.scope import hosts_visible

from .request_fields import EngineShaping, drain_deadline_field, drain_hook_field

REASON_MAX = 2000


class RolloutCreateSerializer(EngineShaping):
    kind = serializers.ChoiceField(choices=[k.value for k in ROLLOUT_KINDS])
    reason = serializers.CharField(max_length=REASON_MAX)
    hosts = serializers.ListField(
        child=serializers.CharField(max_length=63),
        required=False,
        allow_null=True,
        max_length=10_000,
        help_text="Host names; or give host_group.",
    )
    host_group = serializers.SlugRelatedField(
        slug_field="name",
        queryset=HostGroup.objects.all(),
        required=False,
        allow_null=True,
        help_text="Every host of this group, as it is now.",
    )
    unit = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    benchmark = serializers.BooleanField(required=False, default=False)
    benchmark_profile_id = RowField(
        queryset=BenchmarkProfile.objects.all(), required=False, allow_null=True
    )
    benchmark_margin_pct = serializers.IntegerField(
        min_value=0, max_value=90, required=False, default=10
    )
    acknowledge_busy = serializers.BooleanField(required=False, default=False)
    wave_size = serializers.IntegerField(min_value=1, max_value=100_000)
    wave_unit = serializers.ChoiceField(choices=WaveUnit.choices, default=WaveUnit.HOSTS)
    max_down = serializers.IntegerField(min_value=1, max_value=10_000)
    progress_deadline_seconds = serializers.IntegerField(
        min_value=60, max_value=7 * 86400, required=False, default=1800
    )
    drain_hook = drain_hook_field(
        "Drain first: the name of an enabled drain hook (GET drain-hooks/). Each host's "
        "change, and its rollback, takes the host out of rotation with it and waits for its "
        "requests in flight before acting."
    )
    drain_deadline_seconds = drain_deadline_field(
        "With drain_hook: how long each host's job waits for its requests in flight (default "
        "300); then it fails the host's change without touching the service, unless "
        "acknowledge_busy is set."
    )

    def service_arguments(self, user: Any) -> dict[str, Any]:
        data = dict(self.validated_data)
        names = data.pop("hosts", None)
        hosts = None
        if names is not None:
            visible = {h.name: h for h in hosts_visible(user).filter(name__in=names)}
            unknown = sorted(set(names) - set(visible))
            if unknown:
                raise serializers.ValidationError({"hosts": [f"No such host: {unknown[0]}."]})
            hosts = [visible[name] for name in names]
        data["model"] = data.pop("model_id", None)
        data["benchmark_profile"] = data.pop("benchmark_profile_id", None)
        return {**data, "hosts": hosts}


class RolloutFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=RolloutStatus.choices, required=False)


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=REASON_MAX, required=False, default="")


class RolloutHostSerializer(serializers.ModelSerializer):
    host = serializers.CharField(source="host.name")
    unit = serializers.CharField(source="deployment.unit")
    approved = serializers.SerializerMethodField()

    class Meta:
        model = RolloutHost
        fields = [
            "host",
            "unit",
            "wave",
            "status",
            "skip_reason",
            "gate_check",
            "gate_failure",
            "gate",
            "change",
            "rollback_change",
            "approved",
            "finished_at",
        ]

    def get_approved(self, rh: RolloutHost) -> dict[str, Any] | None:
        """What it served when the rollout was approved (null before)."""
        if rh.approved_snapshot_id is None:
            return None
        revision = rh.approved_revision
        return {
            "snapshot": rh.approved_snapshot_id,
            "revision": revision.number if revision is not None else None,
            "unit_sha256": rh.approved_unit_sha256,
            "models": rh.approved_models,
        }


class RolloutSerializer(serializers.ModelSerializer):
    model = serializers.StringRelatedField()
    drain_hook = serializers.CharField(
        source="drain_hook_name", help_text="The drain hook each change runs first ('': none)."
    )
    benchmark = serializers.SerializerMethodField()
    approval = serializers.SerializerMethodField()
    hosts = serializers.SerializerMethodField()
    link = serializers.SerializerMethodField()

    class Meta:
        model = Rollout
        fields = [
            "id",
            "kind",
            "model",
            "tensor_parallel_size",
            "max_model_len",
            "extra_args",
            "environment",
            "acknowledge_busy",
            "drain_hook",
            "drain_deadline_seconds",
            "benchmark",
            "benchmark_margin_pct",
            "host_group_name",
            "unit",
            "wave_size",
            "wave_unit",
            "max_down",
            "progress_deadline_seconds",
            "waves",
            "current_wave",
            "reason",
            "requested_by_name",
            "status",
            "status_reason",
            "params_digest",
            "created_at",
            "started_at",
            "progress_at",
            "finished_at",
            "approval",
            "hosts",
            "link",
        ]

    def get_benchmark(self, rollout: Rollout) -> str | None:
        return (rollout.benchmark or {}).get("name")

    def get_approval(self, rollout: Rollout) -> dict[str, Any] | None:
        decision = rollout.approvals.order_by("-created_at").first()
        if decision is None:
            return None
        return {
            "decision": decision.decision,
            "approver": decision.approver_name,
            "reason": decision.reason,
            "created_at": decision.created_at.isoformat(),
            "expires_at": decision.expires_at.isoformat() if decision.expires_at else None,
            "params_digest": decision.params_digest,
            "hosts_digest": decision.hosts_digest or None,
        }

    def get_hosts(self, rollout: Rollout) -> list[dict[str, Any]]:
        rows = RolloutHost.objects.filter(rollout=rollout).select_related(
            "host", "deployment", "approved_revision"
        )
        return list(RolloutHostSerializer(rows.order_by("position"), many=True).data)

    def get_link(self, rollout: Rollout) -> str:
        return reverse("rollouts:detail", args=[rollout.pk])


REFUSALS = {
    400: OpenApiResponse(description="Invalid input: field errors, or code `invalid`."),
    403: OpenApiResponse(RefusalSerializer, description="Refused: code `forbidden`."),
    404: OpenApiResponse(description="No such rollout (or one naming a host you cannot see)."),
    409: OpenApiResponse(RefusalSerializer, description="Refused: `conflict` or `stale`."),
}


def _rollout(request: Request, pk: int) -> Rollout:
    rollout: Any = row_or_404(selectors.rollouts_visible(request.user), pk, "rollout")
    return rollout


def _detail(rollout: Rollout, status_code: int = status.HTTP_200_OK) -> Response:
    fresh = Rollout.objects.select_related("model").get(pk=rollout.pk)
    return Response(RolloutSerializer(fresh).data, status=status_code)


class RolloutList(APIView):
    serializer_class = RolloutSerializer
    pagination_class = NewestIdPagination
    required_roles = {"POST": OPERATOR}

    def get_queryset(self) -> QuerySet[Rollout]:
        filters = RolloutFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return selectors.rollouts_filtered(user=self.request.user, **filters.validated_data)

    @extend_schema(
        operation_id="rollouts_list",
        summary="Rollouts, newest first, each with every host's state",
        parameters=[RolloutFilterSerializer],
        responses=RolloutSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        return self.page_response(self.get_queryset())

    @extend_schema(
        operation_id="rollouts_create",
        summary="Request a rollout: one change across hosts, in waves",
        description="Needs the operator role on every host. It waits for one approval by a "
        "second person with the approver role on every host.",
        request=RolloutCreateSerializer,
        responses={201: RolloutSerializer, **REFUSALS},
    )
    def post(self, request: Request) -> Response:
        access.rollout_request_allowed(user=request.user)
        form = RolloutCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        rollout = requests.rollout_create(user=request.user, **form.service_arguments(request.user))
        response = _detail(rollout, status.HTTP_201_CREATED)
        response["Location"] = reverse("api:rollout-detail", args=[rollout.pk])
        return response


class RolloutDetail(APIView):
    serializer_class = RolloutSerializer

    @extend_schema(operation_id="rollouts_retrieve", summary="One rollout with every host's state")
    def get(self, request: Request, pk: int) -> Response:
        return _detail(_rollout(request, pk))


class _Decision(APIView):
    serializer_class = ReasonSerializer
    gate = staticmethod(access.rollout_control_allowed)

    def decide(self, rollout: Rollout, user: Any, reason: str) -> Rollout:
        raise NotImplementedError

    def post(self, request: Request, pk: int) -> Response:
        type(self).gate(user=request.user)  # who may at all, before the input is read
        rollout = _rollout(request, pk)
        form = ReasonSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        return _detail(self.decide(rollout, request.user, form.validated_data["reason"]))


def _decision_schema(operation: str, summary: str) -> Any:
    return extend_schema(
        operation_id=operation,
        summary=summary,
        request=ReasonSerializer,
        responses={200: RolloutSerializer, **REFUSALS},
    )


class RolloutApprove(_Decision):
    gate = staticmethod(access.rollout_decide_allowed)

    def decide(self, rollout: Rollout, user: Any, reason: str) -> Rollout:
        return decisions.rollout_approve(rollout=rollout, approver=user, reason=reason)

    @_decision_schema("rollouts_approve", "Approve for every host, on what each serves now")
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)


class RolloutReject(_Decision):
    gate = staticmethod(access.rollout_decide_allowed)

    def decide(self, rollout: Rollout, user: Any, reason: str) -> Rollout:
        return decisions.rollout_reject(rollout=rollout, approver=user, reason=reason)

    @_decision_schema("rollouts_reject", "Reject, with a reason")
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)


class RolloutPause(_Decision):
    def decide(self, rollout: Rollout, user: Any, reason: str) -> Rollout:
        return decisions.rollout_pause(rollout=rollout, user=user, reason=reason)

    @_decision_schema("rollouts_pause", "Start no other host until resumed")
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)


class RolloutResume(_Decision):
    def decide(self, rollout: Rollout, user: Any, reason: str) -> Rollout:
        return decisions.rollout_resume(rollout=rollout, user=user, reason=reason)

    @_decision_schema("rollouts_resume", "Carry on where it stopped")
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)


class RolloutAbort(_Decision):
    def decide(self, rollout: Rollout, user: Any, reason: str) -> Rollout:
        return decisions.rollout_abort(rollout=rollout, user=user, reason=reason)

    @_decision_schema("rollouts_abort", "Stop for good (a reason is required)")
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)
