"""The rows of revision evaluation: benchmark profiles, coherence checks, and each run of either
on a revision. Re-exported by deployments.models (its own module only to keep both short)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from ..choices import BenchmarkEndpoint, CheckKind, EvaluationKind, EvaluationPhase
from .benchmark import levels_as_read

MAX_LEVELS = 8
MAX_CONCURRENCY = 512
MAX_PROMPTS = 16
MAX_PROMPT_CHARS = 4000
# A level is one SSH command, which must end within JOB_COMMAND_TIMEOUT_SECONDS (60 s default).
MAX_DURATION_SECONDS = 50
FILLER_MARK = "{filler}"


def default_levels() -> list[int]:
    return [1, 8, 32, 64]


def validate_levels(value: object) -> None:
    if not isinstance(value, list) or not value:
        raise ValidationError("Give the concurrency levels as a list, e.g. [1, 8, 32, 64].")
    if len(value) > MAX_LEVELS:
        raise ValidationError(f"At most {MAX_LEVELS} concurrency levels.")
    for level in value:
        if isinstance(level, bool) or not isinstance(level, int):
            raise ValidationError(f"Concurrency level {level!r} is not a whole number.")
        if not 1 <= level <= MAX_CONCURRENCY:
            raise ValidationError(f"Concurrency levels go from 1 to {MAX_CONCURRENCY}.")
    if len(set(value)) != len(value):
        raise ValidationError("Each concurrency level once.")


def validate_prompts(value: object) -> None:
    if not isinstance(value, list) or len(value) > MAX_PROMPTS:
        raise ValidationError(f"Give at most {MAX_PROMPTS} prompts as a list of strings.")
    for prompt in value:
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValidationError("Each prompt is a non-empty string.")
        if len(prompt) > MAX_PROMPT_CHARS or "\x00" in prompt:
            raise ValidationError(f"Each prompt has at most {MAX_PROMPT_CHARS} characters.")


def validate_messages(value: object) -> None:
    """A chat as /v1/chat/completions takes it, ending with the user's turn."""
    if not isinstance(value, list) or len(value) > 20:
        raise ValidationError("Give the chat as a list of at most 20 messages.")
    for message in value:
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            raise ValidationError('Each message is {"role": ..., "content": ...}.')
        role = message["role"]
        if not isinstance(role, str) or role not in {"system", "user", "assistant"}:
            raise ValidationError(f"Unknown role {role!r}: system, user or assistant.")
        content = message["content"]
        if not isinstance(content, str) or not content.strip() or len(content) > 4000:
            raise ValidationError("Each message has 1 to 4000 characters of content.")
    if value and value[-1]["role"] != "user":
        raise ValidationError("The chat ends with the user's turn.")


class BenchmarkProfile(models.Model):
    """A serving benchmark an administrator defines and a change picks: concurrency levels,
    lengths, how many requests (or how long) per level, and the prompts. One is the default."""

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    is_default = models.BooleanField(
        default=False, help_text="Preselected on change forms. At most one profile is."
    )
    concurrency_levels = models.JSONField(
        default=default_levels,
        validators=[validate_levels],
        help_text=f"Streams at once, e.g. [1, 8, 32, 64]: 1 to {MAX_CONCURRENCY}, at most "
        f"{MAX_LEVELS} levels, each run as its own command on the host.",
    )
    input_tokens = models.PositiveIntegerField(
        default=128, validators=[MinValueValidator(1), MaxValueValidator(32768)]
    )
    output_tokens = models.PositiveIntegerField(
        default=256, validators=[MinValueValidator(1), MaxValueValidator(8192)]
    )
    requests_per_stream = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(16)],
        help_text="Requests each stream sends at every level (vllm bench serve's --num-prompts "
        "is the level times this). Leave empty to run each level for a duration instead.",
    )
    duration_seconds = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_DURATION_SECONDS)],
        help_text="Keep sending for this long at each level (instead of a number of requests).",
    )
    prompts = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_prompts],
        help_text="A fixed prompt set, used in turn; empty: synthetic prompts of input_tokens "
        "common words each (the input length then applies).",
    )
    endpoint = models.CharField(
        max_length=12, choices=BenchmarkEndpoint.choices, default=BenchmarkEndpoint.COMPLETIONS
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-is_default", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"],
                condition=models.Q(is_default=True),
                name="one_default_benchmark_profile",
            ),
            models.CheckConstraint(
                condition=models.Q(requests_per_stream__isnull=True)
                ^ models.Q(duration_seconds__isnull=True),
                name="benchmark_requests_or_duration",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({', '.join(str(c) for c in self.concurrency_levels)})"

    def clean(self) -> None:
        if (self.requests_per_stream is None) == (self.duration_seconds is None):
            raise ValidationError("Give either requests per stream or a duration, not both.")

    def definition(self) -> dict[str, Any]:
        """What a run of this profile does, frozen into the change that picked it (so editing
        the profile later changes neither an approved change nor the history)."""
        return {
            "id": self.pk,
            "name": self.name,
            "concurrency_levels": list(self.concurrency_levels),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "requests_per_stream": self.requests_per_stream,
            "duration_seconds": self.duration_seconds,
            "prompts": list(self.prompts),
            "endpoint": self.endpoint,
        }


class CoherenceCheck(models.Model):
    """One check of a model's coherence suite: a prompt (or a chat) and what a coherent answer
    contains. Each catalog model gets the default suite the first time it is evaluated;
    administrators edit it in the admin."""

    model = models.ForeignKey(
        "deployments.ModelArtifact", on_delete=models.CASCADE, related_name="coherence_checks"
    )
    kind = models.CharField(max_length=20, choices=CheckKind.choices)
    name = models.CharField(max_length=100)
    position = models.PositiveSmallIntegerField(default=0)
    enabled = models.BooleanField(default=True)
    prompt = models.TextField(
        blank=True,
        max_length=MAX_PROMPT_CHARS,
        help_text=f"The completion prompt. Long-context recall: {FILLER_MARK} marks where the "
        "filler words go.",
    )
    messages = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_messages],
        help_text='Multi-turn chat only: [{"role": "user", "content": "..."}, ...].',
    )
    expect = models.CharField(
        max_length=200, blank=True, help_text="A coherent answer contains this (any case)."
    )
    max_tokens = models.PositiveSmallIntegerField(
        default=32, validators=[MinValueValidator(1), MaxValueValidator(512)]
    )
    context_words = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(16000)],
        help_text="Long-context recall only: how many filler words to put before the question.",
    )

    class Meta:
        ordering = ["model", "position", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["model", "name"], name="coherence_check_name"),
        ]

    def __str__(self) -> str:
        return f"{self.model}: {self.name}"

    def clean(self) -> None:  # one rule per kind: what it sends, and what it needs to judge
        kind = self.kind
        if kind == CheckKind.CHAT and not self.messages:
            raise ValidationError({"messages": "A multi-turn chat check needs its messages."})
        if kind not in {CheckKind.CHAT, CheckKind.PREVIOUS_REVISION} and not self.prompt.strip():
            raise ValidationError({"prompt": "This check needs a prompt."})
        judged = {CheckKind.DETERMINISM, CheckKind.PREVIOUS_REVISION}
        if kind not in judged and not self.expect.strip():
            raise ValidationError({"expect": "Say what a coherent answer contains."})
        if kind == CheckKind.LONG_CONTEXT and (
            FILLER_MARK not in self.prompt or not self.context_words
        ):
            raise ValidationError(
                {"prompt": f"Long-context recall needs {FILLER_MARK} in the prompt and filler."}
            )


class Evaluation(models.Model):
    """One run of a model's coherence suite, or of a serving benchmark, on one revision: before
    a change (baseline), after it, after restoring the previous revision, or on demand.

    `results` holds what each check answered and how it was judged, or each concurrency
    level's figures; `passed` is None while it runs (and for a suite with nothing to judge).
    """

    deployment = models.ForeignKey(
        "deployments.Deployment", on_delete=models.PROTECT, related_name="evaluations"
    )
    revision = models.ForeignKey(
        "deployments.DeploymentRevision", on_delete=models.PROTECT, related_name="evaluations"
    )
    change = models.ForeignKey(
        "deployments.ChangeRequest",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="evaluations",
    )
    phase = models.CharField(max_length=10, choices=EvaluationPhase.choices)
    kind = models.CharField(max_length=10, choices=EvaluationKind.choices)
    profile = models.ForeignKey(
        BenchmarkProfile, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    passed = models.BooleanField(null=True, blank=True)
    results = models.JSONField(default=dict, blank=True)
    summary = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-pk"]
        indexes = [
            # the latest evaluation of each kind of a revision (health verdict, comparison page)
            models.Index(fields=["revision", "kind", "started_at"], name="evaluation_latest"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} of r{self.revision_id} ({self.phase})"

    @property
    def levels(self) -> list[dict[str, Any]]:
        """A benchmark's levels in today's schema (benchmark.level_as_read: rows stored before
        ITL was per chunk show their per-token figure as such); [] for a suite."""
        return levels_as_read(self.results) if self.kind == EvaluationKind.BENCHMARK else []

    @property
    def results_as_read(self) -> dict[str, Any]:
        """`results` as pages and the API show them: a benchmark's levels through `levels`."""
        results = dict(self.results or {})
        if self.kind == EvaluationKind.BENCHMARK and "levels" in results:
            results["levels"] = self.levels
        return results
