"""Forms parse and validate input; the rules themselves live in deployments.services."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.http import QueryDict

from . import kinds, rollback
from .drain_hooks import DEADLINE_DEFAULT_SECONDS, DEADLINE_MAX_SECONDS, DEADLINE_MIN_SECONDS
from .models import BenchmarkProfile, Deployment, DeploymentRevision, DrainHook, ModelArtifact
from .unit_files.engine_flags import EngineArgRefused, carries_secret, check_extra_args
from .unit_files.units import validate_environment

# The fields a change request and a rollout share, with the same words and the same checks: a
# rollout's page can carry what its API carries, and refuses what a change's page refuses.


def extra_args_field() -> forms.CharField:
    return forms.CharField(
        required=False,
        max_length=2000,
        help_text="Space-separated engine flags, e.g. --gpu-memory-utilization=0.95 or "
        "--max-num-seqs 64. The model, served name, parallelism, context length, port and bind "
        "address come from the deployment, not from here; secrets go in the unit's environment "
        "file.",
    )


def environment_field() -> forms.CharField:
    return forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "NCCL_DEBUG=WARN"}),
        help_text="The unit's Environment= variables, one NAME=value per line (empty: keep them "
        "as they are). Secrets belong in an EnvironmentFile= on the host.",
    )


def drain_hook_field() -> forms.ModelChoiceField:
    return forms.ModelChoiceField(
        queryset=DrainHook.objects.filter(enabled=True),
        required=False,
        empty_label="no: act at once",
        label="Drain first",
        help_text="Take the host out of rotation with this hook (an administrator keeps the "
        "list), wait until no request is in flight, act, then put it back.",
    )


def drain_deadline_field() -> forms.IntegerField:
    return forms.IntegerField(
        min_value=DEADLINE_MIN_SECONDS,
        max_value=DEADLINE_MAX_SECONDS,
        required=False,
        initial=DEADLINE_DEFAULT_SECONDS,
        label="Drain deadline (seconds)",
        help_text="How long to wait for the requests in flight. If some are still running then, "
        "the job stops without touching the service, unless you acknowledge dropping them below.",
    )


def parse_extra_args(form: forms.Form) -> list[str] | None:
    """The `extra_args` field as the engine's words, refused as the engine would read a
    reserved flag in any spelling (engine_flags). A refused value that holds a secret is not
    shown back in the page."""
    raw = form.cleaned_data.get("extra_args") or ""
    if not raw.strip():
        return None
    args = raw.split()
    try:
        check_extra_args(args)
    except EngineArgRefused as exc:
        if carries_secret(args):  # the page shows the field again: not with a secret in it
            data = form.data.copy() if isinstance(form.data, QueryDict) else dict(form.data)
            data[form.add_prefix("extra_args")] = ""
            form.data = data
        raise ValidationError(str(exc)) from exc
    return args


def parse_environment(raw: str) -> dict[str, str] | None:
    """NAME=value lines as the unit's Environment= variables (None: keep them as they are)."""
    if not raw.strip():
        return None
    env: dict[str, str] = {}
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        name, eq, value = line.strip().partition("=")
        if not eq:
            raise ValidationError(f"Line {number}: write NAME=value.")
        env[name.strip()] = value.strip()
    try:
        validate_environment(env)
    except ValidationError as exc:
        raise ValidationError(exc.messages) from exc
    return env


class ChangeRequestForm(forms.Form):
    snapshot_id = forms.IntegerField(widget=forms.HiddenInput)
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "why, and what you expect"}),
        max_length=2000,
    )
    model = forms.ModelChoiceField(queryset=ModelArtifact.objects.all(), required=False)
    tensor_parallel_size = forms.IntegerField(min_value=1, max_value=64, required=False)
    max_model_len = forms.IntegerField(min_value=256, max_value=10_000_000, required=False)
    extra_args = extra_args_field()
    environment = environment_field()
    drain_hook = drain_hook_field()
    drain_deadline_seconds = drain_deadline_field()
    acknowledge_busy = forms.BooleanField(
        required=False, label="I know requests are in flight and accept dropping them"
    )
    acknowledge_unknown = forms.BooleanField(
        required=False,
        label="I have read what the snapshot could not see and go ahead without it",
    )
    acknowledge_integrity = forms.BooleanField(
        required=False,
        label="I know the engine's files differ from its package and go ahead anyway",
    )
    benchmark_profile = forms.ModelChoiceField(
        queryset=BenchmarkProfile.objects.all(),
        required=False,
        empty_label="no benchmark",
        label="Serving benchmark, before and after the change",
        help_text="The coherence suite always runs; the benchmark adds a few minutes.",
    )

    def __init__(
        self, *args: Any, kind: str, deployment: Deployment | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind
        self.deployment = deployment
        declared = kinds.spec(kind)
        if declared.chooses_revision and deployment is not None:
            self.fields["revision"] = _revision_field(deployment)
        if declared.takes_model:
            self.fields["model"].required = True
        else:
            del self.fields["model"]
        if not declared.shapes:
            for name in kinds.SHAPING_FIELDS:
                del self.fields[name]
        if not declared.partial_snapshot_ok:
            del self.fields["acknowledge_unknown"]
        if not declared.may_drain:
            del self.fields["drain_hook"], self.fields["drain_deadline_seconds"]
        if not declared.writes_revision:
            del self.fields["acknowledge_integrity"]
        if not declared.serves:
            del self.fields["benchmark_profile"]
        elif not self.is_bound:  # the default profile, preselected
            default = BenchmarkProfile.objects.filter(is_default=True).first()
            self.fields["benchmark_profile"].initial = default.pk if default else None

    def clean_extra_args(self) -> list[str] | None:
        return parse_extra_args(self)

    def clean_revision(self) -> DeploymentRevision | None:
        number = self.cleaned_data.get("revision")
        if number is None or self.deployment is None:
            return None  # one back
        return self.deployment.revisions.filter(number=number).first()

    def clean_environment(self) -> dict[str, str] | None:
        return parse_environment(self.cleaned_data.get("environment") or "")

    # The fields the pre-flight weighs, as the request does (services.change_check); the
    # others (the reason, the benchmark) do not change it.
    PREFLIGHT_FIELDS = (
        "model",
        "tensor_parallel_size",
        "max_model_len",
        "extra_args",
        "environment",
        "revision",
        "acknowledge_busy",
        "acknowledge_integrity",
        "drain_hook",
    )

    def preflight_arguments(self) -> tuple[dict[str, Any], str | None]:
        """The pre-flight's arguments as the form parses them, or the first field's error: what
        is typed so far, whether or not the rest of the form (the reason) is filled in yet."""
        if not self.is_bound:
            return self._initial_revision(), None
        self.is_valid()
        arguments: dict[str, Any] = {}
        for name in self.PREFLIGHT_FIELDS:
            if name not in self.fields:
                continue
            if name in self.errors and self.data.get(name) not in (None, ""):
                label = self.fields[name].label or name.replace("_", " ")
                return {}, f"{label}: {' '.join(str(e) for e in self.errors[name])}"
            value = self.cleaned_data.get(name)
            if value not in (None, ""):
                arguments[name] = value
        return arguments, None

    def _initial_revision(self) -> dict[str, Any]:
        """The revision a link chose for a rollback (the revisions page's "roll back here"),
        for the first pre-flight; nothing when it is not one the select offers."""
        field, value = self.fields.get("revision"), self.initial.get("revision")
        if field is None or self.deployment is None or value in (None, ""):
            return {}
        try:
            number = field.clean(value)
        except ValidationError:
            return {}
        revision = self.deployment.revisions.filter(number=number).first()
        return {"revision": revision} if revision is not None else {}

    def request_arguments(self) -> dict[str, Any]:
        """The valid form as services.change_request_create's keyword arguments (but the
        snapshot, which the view looks up)."""
        data = self.cleaned_data
        return {
            "reason": data["reason"],
            "model": data.get("model"),
            "tensor_parallel_size": data.get("tensor_parallel_size"),
            "max_model_len": data.get("max_model_len"),
            "extra_args": data.get("extra_args"),
            "environment": data.get("environment"),
            "revision": data.get("revision"),
            "acknowledge_busy": data.get("acknowledge_busy", False),
            "acknowledge_unknown": data.get("acknowledge_unknown", False),
            "acknowledge_integrity": data.get("acknowledge_integrity", False),
            "benchmark_profile": data.get("benchmark_profile"),
            "drain_hook": data.get("drain_hook"),
            # The deadline counts only with a hook: the field keeps its default otherwise.
            "drain_deadline_seconds": (
                data.get("drain_deadline_seconds") if data.get("drain_hook") else None
            ),
        }


def _revision_field(deployment: Deployment) -> forms.TypedChoiceField:
    """A select of the revisions a rollback may go back to (deployments.rollback), each with
    its model and when it was made; empty means one back."""
    choices = rollback.rollback_choices(deployment)
    one_back = rollback.rollback_target(deployment)
    default = "one back"
    if one_back is not None and one_back.number is not None:
        default = f"one back: {_revision_label(one_back)}"
    return forms.TypedChoiceField(
        choices=[("", default), *((r.number, _revision_label(r)) for r in choices)],
        coerce=int,
        empty_value=None,
        required=False,
        label="Roll back to",
        help_text="Any revision this deployment served. The approval follows what it serves: "
        "a revision with another model, or other decisive flags, needs a second person.",
        error_messages={
            "invalid_choice": "Revision %(value)s is not one this deployment served before "
            "the current one."
        },
    )


def _revision_label(revision: DeploymentRevision) -> str:
    return (
        f"revision {revision.number} · {revision.model} · TP {revision.tensor_parallel_size} · "
        f"made {revision.created_at:%Y-%m-%d %H:%M} UTC"
    )


class DecisionForm(forms.Form):
    snapshot_id = forms.IntegerField(widget=forms.HiddenInput, required=False)
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), max_length=2000, required=False
    )
