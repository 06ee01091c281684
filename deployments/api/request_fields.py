"""Fields a change request and a rollout request take alike: what the engine is given beyond
the deployment's own fields (checked as the engine's parser reads it), and draining first."""

from __future__ import annotations

from rest_framework import serializers

from controlplane.api.fields import RowField
from deployments.drain_hooks import DEADLINE_MAX_SECONDS, DEADLINE_MIN_SECONDS
from deployments.models import DrainHook, ModelArtifact
from deployments.unit_files.engine_flags import EngineArgRefused, check_extra_args


class EngineShaping(serializers.Serializer):
    """What a request may give the engine beyond the deployment's own fields (which of them a
    kind takes is its declaration's, deployments.kinds). `extra_args` are refused, naming why,
    when they would set what only the deployment's own fields may, in any spelling the engine
    accepts."""

    model_id = RowField(
        queryset=ModelArtifact.objects.all(),
        required=False,
        allow_null=True,
        help_text="The model to swap to (model_swap only).",
    )
    tensor_parallel_size = serializers.IntegerField(
        min_value=1, max_value=64, required=False, allow_null=True
    )
    max_model_len = serializers.IntegerField(
        min_value=256, max_value=10_000_000, required=False, allow_null=True
    )
    extra_args = serializers.ListField(
        child=serializers.CharField(max_length=300),
        max_length=64,
        required=False,
        allow_null=True,
        help_text="Engine flags as the engine reads them: --flag, --flag=value, or --flag "
        "followed by its value (each word an item).",
    )
    environment = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=500),
        required=False,
        allow_null=True,
        help_text="The unit's Environment= variables (NAME: value); omitted keeps them.",
    )

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
