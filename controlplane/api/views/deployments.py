"""Deployments and the model catalog: read-only here, managed in the admin."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from deployments.models import Deployment, ModelArtifact

from ..pagination import IdPagination
from ..serializers.deployments import DeploymentSerializer, ModelArtifactSerializer
from .base import APIView, row_or_404

DEPLOYMENT_RELATED = ("host", "model", "current_revision__model")


class DeploymentFilter(serializers.Serializer):
    host = serializers.CharField(required=False, max_length=63, help_text="A host's name.")


class DeploymentList(APIView):
    serializer_class = DeploymentSerializer
    pagination_class = IdPagination

    def get_queryset(self) -> QuerySet[Deployment]:
        filters = DeploymentFilter(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        qs = Deployment.objects.select_related(*DEPLOYMENT_RELATED)
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
        deployment = row_or_404(
            Deployment.objects.select_related(*DEPLOYMENT_RELATED), pk, "deployment"
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
