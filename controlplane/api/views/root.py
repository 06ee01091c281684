"""The API's front door: where everything is, for people browsing with a session."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from .base import APIView

LINKS = {
    "hosts": "api:host-list",
    "deployments": "api:deployment-list",
    "models": "api:model-list",
    "changes": "api:change-list",
    "audit_events": "api:audit-event-list",
    "audit_export": "api:audit-export",
    "audit_verify": "api:audit-verify",
    "my_tokens": "api:my-token-list",
    "schema": "api:schema",
    "docs": "api:docs",
    "tokens": "api:tokens",
}


class APIRoot(APIView):
    @extend_schema(
        operation_id="root",
        summary="Links to every collection",
        responses=inline_serializer("APIRoot", {name: serializers.URLField() for name in LINKS}),
    )
    def get(self, request: Request) -> Response:
        return Response({k: request.build_absolute_uri(reverse(v)) for k, v in LINKS.items()})
