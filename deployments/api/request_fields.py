"""Fields a change request and a rollout request take alike: what the engine is given beyond
the deployment's own fields (checked as the engine's parser reads it), and draining first."""

from __future__ import annotations

from rest_framework import serializers

from deployments.drain_hooks import DEADLINE_MAX_SECONDS, DEADLINE_MIN_SECONDS
from deployments.models import DrainHook
from deployments.unit_files.engine_flags import EngineArgRefused, check_extra_args


class EngineArgsChecked(serializers.Serializer):
    """A request's `extra_args`, refused (naming why) when they would set what only the
    deployment's own fields may, in any spelling the engine accepts."""

    def validate_extra_args(self, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        try:
            check_extra_args(value)
        except EngineArgRefused as exc:
            raise serializers.ValidationError(str(exc)) from exc
        return value


def drain_hook_field(help_text: str) -> serializers.SlugRelatedField:
    """A drain hook by name, from those an administrator keeps (GET drain-hooks/)."""
    return serializers.SlugRelatedField(
        slug_field="name",
        queryset=DrainHook.objects.all(),
        required=False,
        allow_null=True,
        help_text=help_text,
    )


def drain_deadline_field(help_text: str) -> serializers.IntegerField:
    return serializers.IntegerField(
        min_value=DEADLINE_MIN_SECONDS,
        max_value=DEADLINE_MAX_SECONDS,
        required=False,
        allow_null=True,
        help_text=help_text,
    )
