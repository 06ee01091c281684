"""Forms parse and validate input; the rules themselves live in deployments.services."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from .choices import ChangeKind
from .engine_flags import validate_extra_args
from .models import ModelArtifact


class ChangeRequestForm(forms.Form):
    snapshot_id = forms.IntegerField(widget=forms.HiddenInput)
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "why, and what you expect"}),
        max_length=2000,
    )
    model = forms.ModelChoiceField(queryset=ModelArtifact.objects.all(), required=False)
    tensor_parallel_size = forms.IntegerField(min_value=1, max_value=64, required=False)
    max_model_len = forms.IntegerField(min_value=256, max_value=10_000_000, required=False)
    extra_args = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Space-separated engine flags, e.g. --gpu-memory-utilization=0.95. The model, "
        "served name, parallelism, context length, port and bind address come from the "
        "deployment, not from here.",
    )
    acknowledge_busy = forms.BooleanField(
        required=False, label="I know requests are in flight and accept dropping them"
    )
    benchmark = forms.BooleanField(
        required=False, label="Measure throughput after the change (stored on the revision)"
    )

    def __init__(self, *args: Any, kind: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind
        if kind != ChangeKind.MODEL_SWAP:
            del self.fields["model"]
        if kind not in {ChangeKind.MODEL_SWAP, ChangeKind.REDEPLOY}:
            for name in ("tensor_parallel_size", "max_model_len", "extra_args", "benchmark"):
                del self.fields[name]
        if kind == ChangeKind.MODEL_SWAP:
            self.fields["model"].required = True

    def clean_extra_args(self) -> list[str] | None:
        raw = self.cleaned_data.get("extra_args") or ""
        if not raw.strip():
            return None
        args = raw.split()
        try:
            validate_extra_args(args)
        except ValidationError as exc:
            raise ValidationError(exc.messages) from exc
        return args


class DecisionForm(forms.Form):
    snapshot_id = forms.IntegerField(widget=forms.HiddenInput, required=False)
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), max_length=2000, required=False
    )
