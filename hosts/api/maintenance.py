"""A host's maintenance: read it, enter (or change) it, leave it early. The rules (who may, a
reason with words, an end time in the future and at most MAINTENANCE_MAX away) are
hosts.services.maintenance's; its refusals become 400, 403 or 409 through the API's handler."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.accounts.roles import OPERATOR
from controlplane.api.errors import RefusalSerializer
from controlplane.api.views.base import APIView
from hosts import services as host_services
from hosts.models import Host

from .serializers import MaintenanceSerializer
from .views import host_or_404


class MaintenanceEnterSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, help_text="What is being done: words.")
    until = serializers.DateTimeField(
        help_text="When it ends (ISO 8601; without a zone, UTC): in the future, at most "
        f"{host_services.MAINTENANCE_MAX.days} days away."
    )


class MaintenanceEnteredSerializer(MaintenanceSerializer):
    changed = serializers.BooleanField(
        help_text="The host was in maintenance already: its reason and end time were changed."
    )
    running_change = serializers.IntegerField(
        allow_null=True,
        help_text="A change job running on the host now; maintenance does not stop it.",
    )


REFUSALS = {
    400: OpenApiResponse(RefusalSerializer, description="Invalid input (code `invalid`)."),
    403: OpenApiResponse(RefusalSerializer, description="Not an operator of this host."),
    404: OpenApiResponse(description="No such host."),
}


class HostMaintenance(APIView):
    serializer_class = MaintenanceSerializer
    required_roles = {"POST": OPERATOR, "DELETE": OPERATOR}

    def _host(self) -> Host:
        return host_or_404(self.request, self.kwargs["name"])

    @extend_schema(operation_id="hosts_maintenance_retrieve", summary="A host's maintenance")
    def get(self, request: Request, name: str) -> Response:
        return Response(MaintenanceSerializer(self._host()).data)

    @extend_schema(
        operation_id="hosts_maintenance_enter",
        summary="Put the host in maintenance, or change its reason and end time",
        description="Needs the operator role on the host. Allowed while a change job runs on "
        "it (`running_change` names it): maintenance concerns automation, not people.",
        request=MaintenanceEnterSerializer,
        responses={200: MaintenanceEnteredSerializer, **REFUSALS},
    )
    def post(self, request: Request, name: str) -> Response:
        host = self._host()
        host_services.maintenance.require_maintain_permission(request.user, host)
        given = MaintenanceEnterSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        entered = host_services.host_maintenance_enter(
            host=host, user=request.user, **given.validated_data
        )
        return Response(
            {
                **MaintenanceSerializer(entered.host).data,
                "changed": entered.changed,
                "running_change": entered.running_change,
            }
        )

    @extend_schema(
        operation_id="hosts_maintenance_leave",
        summary="Take the host out of maintenance now",
        request=None,
        responses={
            200: MaintenanceSerializer,
            **REFUSALS,
            409: OpenApiResponse(RefusalSerializer, description="Not in maintenance."),
        },
    )
    def delete(self, request: Request, name: str) -> Response:
        host = host_services.host_maintenance_leave(host=self._host(), user=request.user)
        return Response(MaintenanceSerializer(host).data)
