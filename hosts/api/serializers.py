"""Hosts and their snapshots. Nothing here exposes a credential's key or any other secret:
hosts show their credential's name and key fingerprints only."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from hosts import selectors as host_selectors
from hosts.choices import HostKeyStatus, ProbeTrigger, SnapshotStatus
from hosts.models import Host, StateSnapshot

from .state_schema import host_state_schema


class SnapshotBriefSerializer(serializers.Serializer):
    """The newest snapshot of a host, as a fleet list shows it."""

    id = serializers.IntegerField()
    taken_at = serializers.DateTimeField()
    status = serializers.ChoiceField(choices=SnapshotStatus.choices)
    age_seconds = serializers.FloatField()
    stale = serializers.BooleanField(
        help_text="Older than SNAPSHOT_MAX_AGE_SECONDS: it cannot back a change."
    )

    def to_representation(self, instance: StateSnapshot) -> dict[str, Any]:
        age = instance.age_seconds()
        return {
            "id": instance.pk,
            "taken_at": serializers.DateTimeField().to_representation(instance.taken_at),
            "status": instance.status,
            "age_seconds": round(age, 3),
            "stale": age > settings.SNAPSHOT_MAX_AGE_SECONDS,
        }


class MaintenanceSerializer(serializers.Serializer):
    """A host's maintenance as it is now."""

    in_maintenance = serializers.BooleanField(
        help_text="Until `until`: rollouts skip the host and its verdict sends no webhooks; "
        "scheduled probes go on."
    )
    reason = serializers.CharField(allow_blank=True)
    since = serializers.DateTimeField(allow_null=True)
    until = serializers.DateTimeField(allow_null=True)
    by = serializers.CharField(allow_blank=True, help_text="Who set the reason and end time.")

    def to_representation(self, instance: Host) -> dict[str, Any]:
        if not instance.in_maintenance():
            return {"in_maintenance": False, "reason": "", "since": None, "until": None, "by": ""}
        field = serializers.DateTimeField()
        return {
            "in_maintenance": True,
            "reason": instance.maintenance_reason,
            "since": field.to_representation(instance.maintenance_since),
            "until": field.to_representation(instance.maintenance_until),
            "by": instance.maintenance_by,
        }


class HostSerializer(serializers.ModelSerializer):
    credential = serializers.SlugRelatedField(
        slug_field="name", read_only=True, help_text="The credential's name; never its key."
    )
    host_key_fingerprint = serializers.CharField(read_only=True)
    presented_key_fingerprint = serializers.CharField(
        read_only=True, help_text="A key the host presented that is not trusted (yet)."
    )
    host_key_status = serializers.ChoiceField(choices=HostKeyStatus.choices, read_only=True)
    latest_snapshot = serializers.SerializerMethodField()
    maintenance = serializers.SerializerMethodField()
    groups = serializers.SerializerMethodField(help_text="The host groups it is in, by name.")

    class Meta:
        model = Host
        fields = [
            "name",
            "address",
            "port",
            "username",
            "use_sudo",
            "credential",
            "host_key_status",
            "host_key_fingerprint",
            "presented_key_fingerprint",
            "labels",
            "groups",
            "enabled",
            "probe_interval_seconds",
            "integrity_interval_seconds",
            "last_probe_at",
            "last_integrity_at",
            "created_at",
            "latest_snapshot",
            "maintenance",
        ]
        read_only_fields = fields

    def get_groups(self, host: Host) -> list[str]:
        # The list prefetches every page's groups in one query; a single host reads its own.
        return sorted(group.name for group in host.groups.all())

    @extend_schema_field(SnapshotBriefSerializer(allow_null=True))
    def get_latest_snapshot(self, host: Host) -> dict[str, Any] | None:
        # The list view attaches the page's latest snapshots in one query; a single host
        # looks its own up.
        if hasattr(host, "latest_snapshot"):
            snapshot = host.latest_snapshot
        else:
            snapshot = host_selectors.latest_snapshot(host)
        return SnapshotBriefSerializer(snapshot).data if snapshot is not None else None

    @extend_schema_field(MaintenanceSerializer)
    def get_maintenance(self, host: Host) -> dict[str, Any]:
        return MaintenanceSerializer(host).data  # type: ignore[no-any-return]


@extend_schema_field(host_state_schema())
class ParsedStateField(serializers.DictField):
    """A snapshot's parsed state (hosts.state.HostState as JSON), typed in the schema."""


class SnapshotSerializer(serializers.Serializer):
    """One immutable snapshot: what a probe saw, its status and digest, as the CLI's --json."""

    id = serializers.IntegerField(read_only=True)
    host = serializers.CharField(read_only=True, help_text="The host's name.")
    taken_at = serializers.DateTimeField(read_only=True)
    age_seconds = serializers.FloatField(read_only=True)
    status = serializers.ChoiceField(read_only=True, choices=SnapshotStatus.choices)
    trigger = serializers.ChoiceField(read_only=True, choices=ProbeTrigger.choices)
    duration_ms = serializers.IntegerField(read_only=True)
    digest = serializers.CharField(
        read_only=True, help_text="SHA-256 of the canonical parsed state."
    )
    error = serializers.CharField(read_only=True, allow_blank=True)
    includes_integrity = serializers.BooleanField(read_only=True)
    correlation_id = serializers.CharField(read_only=True, allow_blank=True)
    material_fingerprint = serializers.DictField(
        read_only=True, help_text="What a change compares before it acts (drift check)."
    )
    parsed = ParsedStateField(
        read_only=True, help_text="GPUs, units, servers and problems, as parsed."
    )

    def to_representation(self, instance: StateSnapshot) -> dict[str, Any]:
        return {
            **host_selectors.snapshot_as_dict(instance),
            "includes_integrity": instance.includes_integrity,
            "correlation_id": instance.correlation_id,
        }


class SnapshotDetailSerializer(SnapshotSerializer):
    raw = serializers.DictField(
        read_only=True, help_text="Each probe section's output and exit status."
    )

    def to_representation(self, instance: StateSnapshot) -> dict[str, Any]:
        return {**super().to_representation(instance), "raw": host_selectors.snapshot_raw(instance)}


class ProbeQuerySerializer(serializers.Serializer):
    # `async` is a Python keyword, so that field is added by name rather than declared.
    integrity = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Also check the engine's installed files (slower). Otherwise it runs when "
        "its interval has passed.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["async"] = serializers.BooleanField(
            required=False,
            default=False,
            help_text="Queue the probe for a worker and answer 202 at once.",
        )


class ProbeQueuedSerializer(serializers.Serializer):
    detail = serializers.CharField()
    host = serializers.CharField()
    latest = serializers.CharField(help_text="Where the snapshot appears once the probe ran.")
