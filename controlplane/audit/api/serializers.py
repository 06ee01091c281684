"""Audit events as the history page lists them."""

from __future__ import annotations

from rest_framework import serializers

from controlplane.audit.chain import HASHED_FIELDS
from controlplane.audit.models import AuditEvent

# Every hashed field but the chain link and the user agent, which the event page shows.
LIST_FIELDS = [f for f in HASHED_FIELDS if f not in {"prev_hash", "user_agent"}]


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
