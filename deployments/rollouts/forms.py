"""The rollout form and the decision forms: they parse; the rules are the services'."""

from __future__ import annotations

from typing import Any

from django import forms

from controlplane.accounts.models import HostGroup
from hosts.models import Host
from hosts.scope import hosts_visible

from .. import kinds
from ..forms import (
    drain_deadline_field,
    drain_hook_field,
    environment_field,
    extra_args_field,
    parse_environment,
    parse_extra_args,
)
from ..models import BenchmarkProfile, ModelArtifact
from .choices import ROLLOUT_KINDS, WaveUnit


class HostChoices(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return str(obj.name)


class RolloutForm(forms.Form):
    kind = forms.ChoiceField(choices=[(k.value, kinds.spec(k).label) for k in ROLLOUT_KINDS])
    model = forms.ModelChoiceField(
        queryset=ModelArtifact.objects.all(),
        required=False,
        help_text="A model swap only: the build every host gets.",
    )
    tensor_parallel_size = forms.IntegerField(
        min_value=1, max_value=64, required=False, help_text="Empty: each host keeps its own."
    )
    max_model_len = forms.IntegerField(
        min_value=256, max_value=10_000_000, required=False, help_text="Empty: each keeps its own."
    )
    # What the API takes too, checked as the change form checks it (a model swap and a
    # redeploy only: the service refuses them for the other kinds, by field).
    extra_args = extra_args_field()
    environment = environment_field()
    drain_hook = drain_hook_field()
    drain_deadline_seconds = drain_deadline_field()
    host_group = forms.ModelChoiceField(
        queryset=HostGroup.objects.all(),
        required=False,
        empty_label="(the hosts ticked below)",
        help_text="Every host of the group, as it is now.",
    )
    hosts = HostChoices(
        queryset=Host.objects.none(), required=False, widget=forms.CheckboxSelectMultiple
    )
    unit = forms.CharField(
        max_length=200, required=False, help_text="Empty: each host's one deployment."
    )
    wave_size = forms.IntegerField(
        min_value=1, initial=1, help_text="After the canary (one host, alone): hosts per wave."
    )
    wave_unit = forms.ChoiceField(choices=WaveUnit.choices, initial=WaveUnit.HOSTS)
    max_down = forms.IntegerField(
        min_value=1, initial=1, label="At most this many hosts changing at once"
    )
    benchmark_profile = forms.ModelChoiceField(
        queryset=BenchmarkProfile.objects.all(),
        required=False,
        empty_label="no benchmark (the coherence suite only)",
        label="Serving benchmark, before and after each host's change",
    )
    benchmark_margin_pct = forms.IntegerField(
        min_value=0,
        max_value=90,
        initial=10,
        label="Benchmark margin (%)",
        help_text="A host passes when its throughput is at least 100 - this % of its own "
        "baseline, measured right before its change.",
    )
    progress_deadline_minutes = forms.IntegerField(
        min_value=1,
        max_value=7 * 24 * 60,
        initial=30,
        label="Progress deadline (minutes)",
        help_text="The rollout halts, and rolls its wave back, when no host finishes its turn "
        "for this long.",
    )
    acknowledge_busy = forms.BooleanField(
        required=False, label="Hosts may be serving: their changes drop requests in flight"
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "why, and what you expect"}),
        max_length=2000,
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        hosts = self.fields["hosts"]
        assert isinstance(hosts, HostChoices)
        hosts.queryset = hosts_visible(user).order_by("name")

    def clean_extra_args(self) -> list[str] | None:
        return parse_extra_args(self)

    def clean_environment(self) -> dict[str, str] | None:
        return parse_environment(self.cleaned_data.get("environment") or "")

    def service_arguments(self) -> dict[str, Any]:
        """What deployments.rollouts.requests.rollout_create takes, from the cleaned form."""
        data = self.cleaned_data
        group = data.get("host_group")
        return {
            "kind": data["kind"],
            "model": data.get("model"),
            "tensor_parallel_size": data.get("tensor_parallel_size"),
            "max_model_len": data.get("max_model_len"),
            "extra_args": data.get("extra_args"),
            "environment": data.get("environment"),
            "drain_hook": data.get("drain_hook"),
            # The deadline counts only with a hook: the field keeps its default otherwise.
            "drain_deadline_seconds": (
                data.get("drain_deadline_seconds") if data.get("drain_hook") else None
            ),
            "host_group": group,
            "hosts": None if group is not None else list(data.get("hosts") or []),
            "unit": data.get("unit") or "",
            "wave_size": data["wave_size"],
            "wave_unit": data["wave_unit"],
            "max_down": data["max_down"],
            "benchmark_profile": data.get("benchmark_profile"),
            "benchmark_margin_pct": data["benchmark_margin_pct"],
            "progress_deadline_seconds": data["progress_deadline_minutes"] * 60,
            "acknowledge_busy": data.get("acknowledge_busy", False),
            "reason": data["reason"],
        }


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=2000, required=False)
