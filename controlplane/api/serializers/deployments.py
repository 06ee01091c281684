"""The model catalog, deployments and their revisions."""

from __future__ import annotations

from rest_framework import serializers

from deployments.models import Deployment, DeploymentRevision, ModelArtifact


class ModelArtifactSerializer(serializers.ModelSerializer):
    class Meta:
        model = ModelArtifact
        fields = [
            "id",
            "name",
            "variant",
            "weights_gib",
            "path",
            "served_name",
            "engine",
            "smoke_prompt",
            "smoke_expect",
            "created_at",
        ]
        read_only_fields = fields


class ModelBriefSerializer(serializers.ModelSerializer):
    class Meta:
        model = ModelArtifact
        fields = ["id", "name", "variant", "served_name", "weights_gib"]
        read_only_fields = fields


class RevisionSerializer(serializers.ModelSerializer):
    model = ModelBriefSerializer(read_only=True)
    extra_args = serializers.ListField(child=serializers.CharField(), read_only=True)
    benchmark = serializers.JSONField(read_only=True, allow_null=True)

    class Meta:
        model = DeploymentRevision
        fields = [
            "number",
            "model",
            "engine_binary",
            "tensor_parallel_size",
            "max_model_len",
            "port",
            "extra_args",
            "unit_sha256",
            "unit_text",
            "created_by",
            "created_at",
            "benchmark",
        ]
        read_only_fields = fields


class DeploymentSerializer(serializers.ModelSerializer):
    host = serializers.SlugRelatedField(slug_field="name", read_only=True)
    model = ModelBriefSerializer(read_only=True)
    extra_args = serializers.ListField(child=serializers.CharField(), read_only=True)
    current_revision = RevisionSerializer(read_only=True, allow_null=True)

    class Meta:
        model = Deployment
        fields = [
            "id",
            "host",
            "unit",
            "model",
            "engine_binary",
            "engine_python",
            "engine_dist",
            "tensor_parallel_size",
            "max_model_len",
            "port",
            "extra_args",
            "load_timeout_seconds",
            "current_revision",
            "created_at",
        ]
        read_only_fields = fields
