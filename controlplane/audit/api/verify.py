"""Verify the audit log from the API: the walk `manage.py verify_audit --no-record` does.

Read-only: unlike the command and beat's task, it stores no result (the history page shows
those), so a viewer who asks changes nothing.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.views.base import APIView
from controlplane.audit.verification import chain_verify


class VerificationSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    summary = serializers.CharField()
    events = serializers.IntegerField()
    head_seq = serializers.IntegerField()
    head_hash = serializers.CharField(allow_blank=True)
    checkpoints = serializers.IntegerField(help_text="Signed checkpoints checked.")
    broken_seq = serializers.IntegerField(
        allow_null=True, help_text="The first broken sequence number, when not ok."
    )
    problem = serializers.CharField(allow_blank=True)
    reason = serializers.CharField(allow_blank=True)
    duration_seconds = serializers.FloatField()
    last_checkpoint = serializers.DictField(allow_null=True)


class AuditVerify(APIView):
    serializer_class = VerificationSerializer

    @extend_schema(
        operation_id="audit_verify",
        summary="Walk the hash chain and the signed checkpoints now",
        description="The verification `manage.py verify_audit` runs; 200 either way, with "
        "`ok` false and the first broken sequence number when the log was altered.",
    )
    def get(self, request: Request) -> Response:
        # One process: a web server's process must not fork a pool of walkers.
        result = chain_verify(workers=1)
        return Response({**result.as_dict(), "summary": result.summary()})
