"""Deployments and the model catalog (read-only here, managed in the admin); change requests:
request, read, approve, reject, break glass, cancel.

Each write calls one function of deployments.services, which enforces every rule (roles, the
two-person rule, freshness, fit, one job per host); its refusals become 403, 409 or 400 through
the API's exception handler.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.accounts.roles import OPERATOR
from controlplane.api.errors import RefusalSerializer
from controlplane.api.pagination import IdPagination, NewestIdPagination
from controlplane.api.views.base import APIView, row_or_404
from deployments import services
from deployments.choices import ChangeStatus
from deployments.models import (
    BenchmarkProfile,
    ChangeRequest,
    Deployment,
    DrainHook,
    ModelArtifact,
)
from hosts.scope import rows_visible

from . import selectors
from .change_requests import (
    ApproveSerializer,
    BreakGlassSerializer,
    ChangeCreateSerializer,
    ChangeFilterSerializer,
    RejectSerializer,
)
from .evaluations import BenchmarkProfileSerializer, EvaluationSerializer
from .serializers import (
    ChangeDetailSerializer,
    ChangeSerializer,
    DecisionRefusalSerializer,
    DeploymentSerializer,
    DrainHookSerializer,
    ModelArtifactSerializer,
    RevisionWithEvaluationsSerializer,
)

# --- deployments and the model catalog -----------------------------------------------------

DEPLOYMENT_RELATED = ("host", "model", "current_revision__model")


def _deployment(request: Request, pk: int, rows: QuerySet[Deployment] | None = None) -> Any:
    """The deployment if the caller sees its host; otherwise the 404 of one that does not
    exist."""
    rows = Deployment.objects.all() if rows is None else rows
    return row_or_404(rows_visible(request.user, rows), pk, "deployment")


class DeploymentFilter(serializers.Serializer):
    host = serializers.CharField(required=False, max_length=63, help_text="A host's name.")


class DeploymentList(APIView):
    serializer_class = DeploymentSerializer
    pagination_class = IdPagination

    def get_queryset(self) -> QuerySet[Deployment]:
        filters = DeploymentFilter(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        qs = rows_visible(self.request.user, Deployment.objects.select_related(*DEPLOYMENT_RELATED))
        if host := filters.validated_data.get("host"):
            qs = qs.filter(host__name=host)
        return qs

    @extend_schema(
        operation_id="deployments_list",
        summary="Deployments, oldest first",
        responses=DeploymentSerializer(many=True),
        parameters=[OpenApiParameter("host", str, description="Only this host's.")],
    )
    def get(self, request: Request) -> Response:
        return self.page_response(self.get_queryset())


class DeploymentDetail(APIView):
    serializer_class = DeploymentSerializer

    @extend_schema(operation_id="deployments_retrieve", summary="One deployment")
    def get(self, request: Request, pk: int) -> Response:
        deployment = _deployment(
            request, pk, Deployment.objects.select_related(*DEPLOYMENT_RELATED)
        )
        return Response(self.get_serializer(deployment).data)


class ModelList(APIView):
    serializer_class = ModelArtifactSerializer
    pagination_class = IdPagination

    def get_queryset(self) -> QuerySet[ModelArtifact]:
        return ModelArtifact.objects.all()

    @extend_schema(
        operation_id="models_list",
        summary="The model catalog",
        responses=ModelArtifactSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        return self.page_response(self.get_queryset())


class ModelDetail(APIView):
    serializer_class = ModelArtifactSerializer

    @extend_schema(operation_id="models_retrieve", summary="One model build")
    def get(self, request: Request, pk: int) -> Response:
        model = row_or_404(ModelArtifact.objects.all(), pk, "model")
        return Response(self.get_serializer(model).data)


# --- revisions, their evaluations, benchmark profiles --------------------------------------


class NewestRevisionPagination(IdPagination):
    ordering = "-number"


class RevisionList(APIView):
    serializer_class = RevisionWithEvaluationsSerializer
    pagination_class = NewestRevisionPagination

    def get_queryset(self) -> QuerySet[Any]:
        deployment = _deployment(self.request, self.kwargs["pk"])
        return selectors.revisions_with_evaluations(deployment)

    @extend_schema(
        operation_id="deployments_revisions_list",
        summary="A deployment's revisions, newest first, with each coherence suite and "
        "benchmark run on them",
        responses=RevisionWithEvaluationsSerializer(many=True),
    )
    def get(self, request: Request, pk: int) -> Response:
        return self.page_response(self.get_queryset())


class RevisionEvaluationList(APIView):
    serializer_class = EvaluationSerializer
    pagination_class = NewestIdPagination

    def get_queryset(self) -> QuerySet[Any]:
        deployment = _deployment(self.request, self.kwargs["pk"])
        number = self.kwargs["number"]
        revision = deployment.revisions.filter(number=number).first() if number < 2**31 else None
        if revision is None:
            raise NotFound("No such revision.")
        return selectors.revision_evaluations(revision)

    @extend_schema(
        operation_id="deployments_revisions_evaluations_list",
        summary="Every coherence suite and benchmark run on one revision, with its results",
        responses=EvaluationSerializer(many=True),
    )
    def get(self, request: Request, pk: int, number: int) -> Response:
        return self.page_response(self.get_queryset())


class BenchmarkProfileList(APIView):
    serializer_class = BenchmarkProfileSerializer
    pagination_class = IdPagination

    def get_queryset(self) -> QuerySet[BenchmarkProfile]:
        return BenchmarkProfile.objects.all()

    @extend_schema(
        operation_id="benchmark_profiles_list",
        summary="Serving benchmark profiles (managed in the admin; one is the default)",
        responses=BenchmarkProfileSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        return self.page_response(self.get_queryset())


class BenchmarkProfileDetail(APIView):
    serializer_class = BenchmarkProfileSerializer

    @extend_schema(operation_id="benchmark_profiles_retrieve", summary="One benchmark profile")
    def get(self, request: Request, pk: int) -> Response:
        profile = row_or_404(BenchmarkProfile.objects.all(), pk, "benchmark profile")
        return Response(self.get_serializer(profile).data)


class DrainHookList(APIView):
    serializer_class = DrainHookSerializer
    pagination_class = IdPagination

    def get_queryset(self) -> QuerySet[DrainHook]:
        return DrainHook.objects.all()

    @extend_schema(
        operation_id="drain_hooks_list",
        summary="Drain hooks a change may drain first with (managed in the admin)",
        responses=DrainHookSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        return self.page_response(self.get_queryset())


# --- change requests -----------------------------------------------------------------------

REFUSALS = {
    400: OpenApiResponse(description="Invalid input: field errors, or code `invalid`."),
    403: OpenApiResponse(RefusalSerializer, description="Refused: code `forbidden`."),
    404: OpenApiResponse(description="No such change."),
    409: OpenApiResponse(
        RefusalSerializer,
        description="Refused: code `stale` (with snapshot_age_seconds and limit_seconds) or "
        "`conflict`.",
    ),
}
DECISION_RESPONSES = {
    200: ChangeDetailSerializer,
    **REFUSALS,
    409: OpenApiResponse(
        DecisionRefusalSerializer,
        description="Refused (code `stale` or `conflict`, as RefusalSerializer), or code "
        "`drifted`: the host changed since the request, which is now marked drifted (the "
        "change is included).",
    ),
}


def _change(request: Request, pk: int) -> ChangeRequest:
    """The change if the caller sees its host; otherwise the 404 of a change that does not
    exist."""
    changes = rows_visible(request.user, ChangeRequest.objects.select_related("host"))
    change: Any = row_or_404(changes, pk, "change")
    return change


def _detail(change: ChangeRequest, *, status_code: int = status.HTTP_200_OK) -> Response:
    fresh = selectors.change_with_history(change.pk)
    return Response(ChangeDetailSerializer(fresh).data, status=status_code)


def _decided(change: ChangeRequest) -> Response:
    """An approval on a snapshot that differs from the request's marks the change drifted:
    the decision is recorded, but what the caller asked for did not happen."""
    if change.status == ChangeStatus.DRIFTED:
        fresh = selectors.change_with_history(change.pk)
        return Response(
            {
                "detail": change.status_reason,
                "code": "drifted",
                "change": ChangeDetailSerializer(fresh).data,
            },
            status=status.HTTP_409_CONFLICT,
        )
    return _detail(change)


class ChangeList(APIView):
    serializer_class = ChangeSerializer
    pagination_class = NewestIdPagination
    required_roles = {"POST": OPERATOR}

    def get_queryset(self) -> QuerySet[ChangeRequest]:
        filters = ChangeFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return selectors.changes_filtered(user=self.request.user, **filters.validated_data)

    @extend_schema(
        operation_id="changes_list",
        summary="Change requests, newest first",
        parameters=[ChangeFilterSerializer],
        responses=ChangeSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        return self.page_response(self.get_queryset())

    @extend_schema(
        operation_id="changes_create",
        summary="Request a change on a snapshot",
        description="Needs the operator role. Model swaps (and the kinds policy names) wait "
        "for a second person's approval; the rest are queued at once.",
        request=ChangeCreateSerializer,
        responses={201: ChangeDetailSerializer, **REFUSALS},
    )
    def post(self, request: Request) -> Response:
        form = ChangeCreateSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        change = services.change_request_create(user=request.user, **form.service_arguments())
        response = _detail(change, status_code=status.HTTP_201_CREATED)
        response["Location"] = reverse("api:change-detail", args=[change.pk])
        return response


class ChangeDetail(APIView):
    serializer_class = ChangeDetailSerializer

    @extend_schema(
        operation_id="changes_retrieve",
        summary="One change with its steps, approvals and drift report",
    )
    def get(self, request: Request, pk: int) -> Response:
        return _detail(_change(request, pk))


class ChangeApprove(APIView):
    serializer_class = ApproveSerializer

    @extend_schema(
        operation_id="changes_approve",
        summary="Approve on the snapshot you reviewed",
        description="Needs the approver role, and someone other than the requester.",
        request=ApproveSerializer,
        responses=DECISION_RESPONSES,
    )
    def post(self, request: Request, pk: int) -> Response:
        services.change_request_approve_allowed(user=request.user)  # before the input is read
        change = _change(request, pk)
        services.change_request_approve_allowed(user=request.user, host=change.host)
        form = ApproveSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        decided = services.change_request_approve(
            change=change,
            approver=request.user,
            snapshot=form.validated_data["snapshot_id"],
            reason=form.validated_data.get("reason", ""),
        )
        return _decided(decided)


class ChangeReject(APIView):
    serializer_class = RejectSerializer

    @extend_schema(
        operation_id="changes_reject",
        summary="Reject, with a reason",
        request=RejectSerializer,
        responses={200: ChangeDetailSerializer, **REFUSALS},
    )
    def post(self, request: Request, pk: int) -> Response:
        services.change_request_reject_allowed(user=request.user)  # before the input is read
        change = _change(request, pk)
        services.change_request_reject_allowed(user=request.user, host=change.host)
        form = RejectSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        services.change_request_reject(
            change=change, approver=request.user, reason=form.validated_data["reason"]
        )
        return _detail(change)


class ChangeBreakGlass(APIView):
    serializer_class = BreakGlassSerializer

    @extend_schema(
        operation_id="changes_break_glass",
        summary="Administrators only: queue without a second person",
        request=BreakGlassSerializer,
        responses=DECISION_RESPONSES,
    )
    def post(self, request: Request, pk: int) -> Response:
        services.change_request_break_glass_allowed(user=request.user)  # before the input
        change = _change(request, pk)
        form = BreakGlassSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        decided = services.change_request_break_glass(
            change=change,
            admin=request.user,
            snapshot=form.validated_data["snapshot_id"],
            reason=form.validated_data["reason"],
        )
        return _decided(decided)


class ChangeCancel(APIView):
    serializer_class = ChangeDetailSerializer

    @extend_schema(
        operation_id="changes_cancel",
        summary="Withdraw a waiting change, or ask a running job to stop",
        request=None,
        responses={200: ChangeDetailSerializer, **REFUSALS},
    )
    def post(self, request: Request, pk: int) -> Response:
        return _detail(
            services.change_request_cancel(change=_change(request, pk), user=request.user)
        )
