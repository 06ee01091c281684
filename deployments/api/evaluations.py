"""Serving benchmark profiles and evaluations (coherence suites and benchmarks) as the API shows
them; read-only: profiles are managed in the admin, evaluations written by change jobs."""

from __future__ import annotations

from rest_framework import serializers

from deployments.choices import EvaluationKind, EvaluationPhase
from deployments.models import BenchmarkProfile, Evaluation


class BenchmarkProfileSerializer(serializers.ModelSerializer):
    concurrency_levels = serializers.ListField(child=serializers.IntegerField(), read_only=True)
    prompts = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = BenchmarkProfile
        fields = [
            "id",
            "name",
            "description",
            "is_default",
            "concurrency_levels",
            "input_tokens",
            "output_tokens",
            "requests_per_stream",
            "duration_seconds",
            "prompts",
            "endpoint",
            "created_at",
        ]
        read_only_fields = fields


class EvaluationBriefSerializer(serializers.ModelSerializer):
    revision = serializers.IntegerField(source="revision.number", read_only=True)
    change_id = serializers.IntegerField(read_only=True, allow_null=True)
    phase = serializers.ChoiceField(choices=EvaluationPhase.choices, read_only=True)
    kind = serializers.ChoiceField(choices=EvaluationKind.choices, read_only=True)
    passed = serializers.BooleanField(
        read_only=True, allow_null=True, help_text="null while it runs, or if it did not finish."
    )

    class Meta:
        model = Evaluation
        fields = [
            "id",
            "revision",
            "change_id",
            "phase",
            "kind",
            "started_at",
            "finished_at",
            "passed",
            "summary",
        ]
        read_only_fields = fields


class EvaluationSerializer(EvaluationBriefSerializer):
    profile_id = serializers.IntegerField(read_only=True, allow_null=True)
    results = serializers.JSONField(
        source="results_as_read",
        read_only=True,
        help_text="coherence: {checks: [{name, kind, outcome (passed, failed, inconclusive or "
        "skipped), detail, prompt, answer, prompt_tokens, ...}]}; benchmark: {profile, levels: "
        "[{schema, concurrency, output_tok_s, requests_s, ttft_ms: {p50, p99}, itl_ms: {p50, "
        "p99} (per chunk, as vllm bench serve reports ITL; null in levels of schema 1, stored "
        "before it was measured), itl_per_token_ms: {p50, p99}, tpot_ms: {mean}, "
        "input_tokens_asked, input_tokens_sent: {mean, min, max}, input_counted_by (tokenize, "
        "words or prompts), notes, errors, ...}]}.",
    )

    class Meta(EvaluationBriefSerializer.Meta):
        fields = [*EvaluationBriefSerializer.Meta.fields, "profile_id", "results"]
        read_only_fields = fields
