"""Audit events as the history page lists them."""

from __future__ import annotations

from rest_framework import serializers

from controlplane.audit.models import AuditEvent

LIST_FIELDS = [
    "seq",
    "created_at",
    "actor",
    "actor_user_id",
    "action",
    "target_type",
    "target_id",
    "target_label",
    "host_id",
    "host_label",
    "snapshot_id",
    "snapshot_digest",
    "snapshot_age_seconds",
    "correlation_id",
    "data",
    "ip",
]


class AuditEventSerializer(serializers.ModelSerializer):
    data = serializers.JSONField(read_only=True)

    class Meta:
        model = AuditEvent
        fields = LIST_FIELDS
        read_only_fields = fields


class AuditEventDetailSerializer(AuditEventSerializer):
    class Meta(AuditEventSerializer.Meta):
        fields = [*LIST_FIELDS, "user_agent", "prev_hash", "hash"]
        read_only_fields = fields


class AuditPageSerializer(serializers.Serializer):
    """Newest first. Follow `next` for older events and `previous` for newer ones."""

    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = AuditEventSerializer(many=True)
