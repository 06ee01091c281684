"""The audit log: filtered events by keyset on seq, one event, and streaming exports.

The filters, their form, the page query and the export rows are the history page's own
(controlplane.audit), so the API and the page always agree on what matches.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from typing import Any

from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, renderers, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

from controlplane.api.fields import BIGINT_MAX
from controlplane.api.views.base import APIView, row_or_404
from controlplane.audit import selectors as audit_selectors
from controlplane.audit.export import csv_lines, jsonl_lines
from controlplane.audit.forms import EventFilterForm
from controlplane.audit.models import AuditEvent
from controlplane.audit.selectors import EventFilter

from .serializers import (
    AuditEventDetailSerializer,
    AuditEventSerializer,
    AuditPageSerializer,
)

# The selectors widen time filters by a few minutes; keep them clear of datetime's limits.
EARLIEST = dt.datetime(2, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(9998, 12, 31, tzinfo=dt.UTC)
# What a host label can be: host names are lower-case letters, digits, dots and dashes.
_HOST_FILTER = re.compile(r"[a-z0-9][a-z0-9.-]{0,62}")

FILTER_PARAMETERS = [
    OpenApiParameter("actor", str, description="Exact user name or system actor."),
    OpenApiParameter("action", str, description='Exact, or a prefix ending in "." or "*".'),
    OpenApiParameter("host", str, description="A host's name or id."),
    OpenApiParameter("target", str, description='"type:id" (hosts.host:3) or part of a label.'),
    OpenApiParameter("since", OpenApiTypes.DATETIME, description="From this time (UTC)."),
    OpenApiParameter("until", OpenApiTypes.DATETIME, description="Before this time (UTC)."),
    OpenApiParameter("text", str, description="Free text over names, labels and data."),
    OpenApiParameter("correlation", str, description="One request's or change's events."),
]


def event_filter(request: Request) -> EventFilter:
    """The history page's filter form, plus the checks an API caller's free hand needs."""
    form = EventFilterForm(request.query_params)
    if not form.is_valid():
        raise exceptions.ValidationError(
            {
                "non_field_errors" if field == "__all__" else field: [e["message"] for e in errors]
                for field, errors in form.errors.get_json_data().items()
            }
        )
    filters = form.to_filter()
    errors: dict[str, str] = {}
    host = filters.host
    # A host filter is a host's id or name, and names are validated when hosts are created.
    if host and not (
        (host.isascii() and host.isdigit() and int(host) <= BIGINT_MAX)
        or _HOST_FILTER.fullmatch(host)
    ):
        errors["host"] = "Enter a host name or id."
    for name in ("since", "until"):
        value = getattr(filters, name)
        if value is not None and not EARLIEST <= value <= LATEST:
            errors[name] = "Out of range."
    if errors:
        raise exceptions.ValidationError(errors)
    return filters


class PageQuery(serializers.Serializer):
    before = serializers.IntegerField(
        required=False, min_value=1, max_value=BIGINT_MAX, help_text="Events older than seq."
    )
    after = serializers.IntegerField(
        required=False, min_value=1, max_value=BIGINT_MAX, help_text="Events newer than seq."
    )
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200, default=50)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "before" in attrs and "after" in attrs:
            raise serializers.ValidationError("Give before or after, not both.")
        return attrs


class AuditEventList(APIView):
    serializer_class = AuditEventSerializer

    @extend_schema(
        operation_id="audit_events_list",
        summary="Audit events, newest first, filtered like the history page",
        description="Keyset pages on seq: `next` has `before=<seq>` (older events), "
        "`previous` has `after=<seq>` (newer ones).",
        parameters=[*FILTER_PARAMETERS, PageQuery],
        responses={200: AuditPageSerializer},
    )
    def get(self, request: Request) -> Response:
        filters = event_filter(request)
        query = PageQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        page = audit_selectors.events_page(
            filters=filters,
            user=request.user,
            before=query.validated_data.get("before"),
            after=query.validated_data.get("after"),
            size=query.validated_data["page_size"],
        )
        url = remove_query_param(
            remove_query_param(request.build_absolute_uri(), "before"), "after"
        )
        return Response(
            {
                "next": replace_query_param(url, "before", page.older) if page.older else None,
                "previous": replace_query_param(url, "after", page.newer) if page.newer else None,
                "results": self.get_serializer(page.events, many=True).data,
            }
        )


class AuditEventDetail(APIView):
    serializer_class = AuditEventDetailSerializer

    @extend_schema(operation_id="audit_events_retrieve", summary="One event, with its hashes")
    def get(self, request: Request, seq: int) -> Response:
        events = audit_selectors.events_in_scope(AuditEvent.objects.all(), user=request.user)
        event = row_or_404(events, seq, "event")
        return Response(self.get_serializer(event).data)


class JSONLinesRenderer(renderers.BaseRenderer):
    media_type = "application/x-ndjson"
    format = "jsonl"
    charset = "utf-8"


class CSVRenderer(renderers.BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"


class AuditExport(APIView):
    """`?format=` is DRF's own format override, so each export format is a renderer; the
    rows are streamed by the history page's exporters, never rendered by DRF."""

    renderer_classes = [JSONLinesRenderer, CSVRenderer]

    @extend_schema(
        operation_id="audit_export",
        summary="Export matching events, oldest first, streamed",
        description="`format=jsonl` (default): each line is the event's canonical JSON and "
        "its hash, so an unfiltered export verifies offline. `format=csv`: one row per event.",
        parameters=[
            *FILTER_PARAMETERS,
            OpenApiParameter("format", str, enum=["jsonl", "csv"], description="jsonl or csv"),
        ],
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR),
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR),
        },
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        filters = event_filter(request)
        rows = audit_selectors.events_export_rows(filters=filters, user=request.user)
        kind = request.accepted_renderer.format
        body: Iterator[str] = csv_lines(rows) if kind == "csv" else jsonl_lines(rows)
        response = StreamingHttpResponse(
            body, content_type=f"{request.accepted_renderer.media_type}; charset=utf-8"
        )
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.{kind}"'
        response["Cache-Control"] = "no-store"
        return response

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        # Errors (401, 403, 400) are JSON like everywhere else, whatever format was asked for.
        if isinstance(response, Response):
            request.accepted_renderer = renderers.JSONRenderer()
            request.accepted_media_type = "application/json"
        return super().finalize_response(request, response, *args, **kwargs)
