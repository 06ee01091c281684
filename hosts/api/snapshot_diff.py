"""Two snapshots compared the way a change compares them before it acts: their material
fingerprints, field by field (`hosts.state.fingerprint_drift`, the drift report's own
function), so `cpctl snapshots diff` shows exactly what would count as drift."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.views.base import APIView, row_or_404
from hosts.models import StateSnapshot
from hosts.scope import rows_visible
from hosts.state import fingerprint_drift

from .serializers import SnapshotBriefSerializer


class DriftFieldSerializer(serializers.Serializer):
    field = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)


class SnapshotDiffSerializer(serializers.Serializer):
    before = SnapshotBriefSerializer()
    after = SnapshotBriefSerializer()
    before_host = serializers.CharField()
    after_host = serializers.CharField()
    differences = DriftFieldSerializer(
        many=True, help_text="Material fields that differ; empty: no drift between them."
    )


class SnapshotDiff(APIView):
    serializer_class = SnapshotDiffSerializer

    @extend_schema(
        operation_id="snapshots_diff",
        summary="What differs materially from snapshot `id` to snapshot `other`",
        description="The material fingerprints (unit state and main PID, model served, "
        "revision and unit-file hash, GPU count, ...) compared field by field, as the drift "
        "check before a change compares them.",
        responses={
            200: SnapshotDiffSerializer,
            404: OpenApiResponse(description="No such snapshot."),
        },
    )
    def get(self, request: Request, pk: int, other: int) -> Response:
        # A snapshot of a host outside the caller's scope is as missing as one never taken.
        rows = rows_visible(request.user, StateSnapshot.objects.select_related("host"))
        before: Any = row_or_404(rows, pk, "snapshot")
        after: Any = row_or_404(rows, other, "snapshot")
        return Response(
            {
                "before": SnapshotBriefSerializer(before).data,
                "after": SnapshotBriefSerializer(after).data,
                "before_host": before.host.name,
                "after_host": after.host.name,
                "differences": fingerprint_drift(
                    before.material_fingerprint(), after.material_fingerprint()
                ),
            }
        )
