"""A unit's journal over the API: the host page's "show journal", for the command line.

Reading a journal opens an SSH connection, so it is audited by the service (every attempt,
including the failed ones); this view only parses the path and the line count.
"""

from __future__ import annotations

import re

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.errors import RefusalSerializer
from controlplane.api.views.base import APIView
from hosts import commands
from hosts import services as host_services
from hosts.services.journal import DEFAULT_JOURNAL_LINES
from hosts.validators import UNIT_RE

from .views import host_or_404

_UNIT = re.compile(UNIT_RE)


class JournalQuery(serializers.Serializer):
    lines = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=commands.JOURNAL_MAX_LINES,
        default=DEFAULT_JOURNAL_LINES,
        help_text="How many of the newest lines (the answer is also bounded in bytes).",
    )


class JournalSerializer(serializers.Serializer):
    host = serializers.CharField()
    unit = serializers.CharField()
    lines = serializers.ListField(
        child=serializers.CharField(allow_blank=True), help_text="Oldest first, short-iso."
    )


class HostUnitJournal(APIView):
    serializer_class = JournalSerializer

    @extend_schema(
        operation_id="hosts_units_journal",
        summary="The newest lines of a deployed unit's journal, read over SSH now (audited)",
        parameters=[JournalQuery],
        responses={
            200: JournalSerializer,
            400: OpenApiResponse(description="A line count out of range."),
            404: OpenApiResponse(description="No such host, or the unit is not deployed on it."),
            409: OpenApiResponse(
                RefusalSerializer, description="The journal could not be read (code conflict)."
            ),
        },
    )
    def get(self, request: Request, name: str, unit: str) -> Response:
        host = host_or_404(request, name)
        # Like host names, a unit that breaks the pattern names nothing deployed; checking it
        # here keeps odd bytes away from the database.
        if not _UNIT.fullmatch(unit):
            raise exceptions.NotFound("No such unit.")
        query = JournalQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        lines = host_services.host_journal(
            host=host, unit=unit, lines=query.validated_data["lines"], user=request.user
        )
        return Response({"host": host.name, "unit": unit, "lines": lines})
