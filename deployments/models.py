"""The model catalog and the deployments that serve models on hosts."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth.models import User
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from controlplane.redaction import redact_text
from hosts import validators
from hosts.models import Host, StateSnapshot

from .choices import (
    GRANTS,
    ApprovalDecision,
    ApprovalLapse,
    ChangeKind,
    ChangeStatus,
    DrainState,
    Engine,
    Quantization,
    StepStatus,
)
from .unit_files.engine_flags import validate_extra_args
from .unit_files.serving_plan import ServingPlan, unit_plan
from .unit_files.units import DRAIN_GRACE_MAX_SECONDS, validate_environment


class ModelArtifact(models.Model):
    """One build of a model as it lies on the hosts' disks (e.g. Kimi-K2.5 in NVFP4)."""

    name = models.CharField(max_length=200, validators=[validators.validate_model_id])
    variant = models.CharField(max_length=10, choices=Quantization.choices)
    weights_gib = models.FloatField(validators=[MinValueValidator(0.1), MaxValueValidator(100_000)])
    path = models.CharField(
        max_length=500,
        validators=[validators.validate_model_location],
        help_text="What the engine is given: an absolute path on the host, or a repository id "
        "(nvidia/Kimi-K2.5-NVFP4) the engine resolves from its cache.",
    )
    served_name = models.CharField(
        max_length=128,
        validators=[validators.validate_served_name],
        help_text="The id the server reports in /v1/models.",
    )
    engine = models.CharField(max_length=10, choices=Engine.choices, default=Engine.VLLM)
    smoke_prompt = models.CharField(max_length=500, default="The capital of France is")
    smoke_expect = models.CharField(
        max_length=100, default="Paris", help_text="A coherent completion contains this text."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "variant"]
        constraints = [
            models.UniqueConstraint(fields=["name", "variant"], name="artifact_name_variant"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.variant})"


class Deployment(models.Model):
    """A systemd service on a host that serves one model with one set of engine arguments."""

    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="deployments")
    unit = models.CharField(max_length=200, validators=[validators.validate_unit_name])
    model = models.ForeignKey(ModelArtifact, on_delete=models.PROTECT, related_name="deployments")
    engine_binary = models.CharField(
        max_length=300,
        default="/opt/vllm/.venv/bin/vllm",
        validators=[validators.validate_abs_path],
    )
    engine_python = models.CharField(
        max_length=300,
        default="/opt/vllm/.venv/bin/python3",
        validators=[validators.validate_abs_path],
        help_text="Interpreter of the engine's install, used by the integrity check.",
    )
    engine_dist = models.CharField(
        max_length=100, default="vllm", validators=[validators.validate_dist_name]
    )
    engine_package_source = models.CharField(
        max_length=300,
        blank=True,
        validators=[validators.validate_abs_path],
        help_text="Where an engine repair reinstalls the engine from: empty for the index the "
        "engine's pip is configured with, or a wheel directory on the host (pip install "
        "--no-index --find-links <dir>).",
    )
    tensor_parallel_size = models.PositiveSmallIntegerField(
        default=8, validators=[MinValueValidator(1), MaxValueValidator(64)]
    )
    max_model_len = models.PositiveIntegerField(
        default=262144, validators=[MinValueValidator(256), MaxValueValidator(10_000_000)]
    )
    port = models.PositiveIntegerField(
        default=8000, validators=[MinValueValidator(1024), MaxValueValidator(65535)]
    )
    bind_address = models.CharField(
        max_length=45,
        default="127.0.0.1",
        blank=True,
        validators=[validators.validate_bind_address],
        help_text="The address the server listens on (--host). 127.0.0.1 keeps it on the "
        "host; 0.0.0.0 opens it to the network; empty runs without --host, on the engine's "
        "default (every interface). An adopted unit's is what it runs. Changing it needs "
        "approval.",
    )
    extra_args = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_extra_args],
        help_text="Further engine flags. The model, served name, parallelism, context length, "
        "port and bind address come from the fields above and cannot be given here.",
    )
    environment = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_environment],
        help_text="Environment= variables of the unit (NAME: value). Secrets go in an "
        "EnvironmentFile= on the host, never here. Changing them needs approval.",
    )
    load_timeout_seconds = models.PositiveIntegerField(
        default=900, validators=[MinValueValidator(5), MaxValueValidator(7200)]
    )
    drain_grace_seconds = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(DRAIN_GRACE_MAX_SECONDS)],
        help_text="How long a stopping server lets the requests in flight finish (0: it aborts "
        "them). vLLM gets --shutdown-timeout with it; systemd's TimeoutStopSec= is set longer "
        "(unit_files.units.STOP_MARGIN_SECONDS more); SGLang drains on SIGTERM by itself and "
        "gets TimeoutStopSec= only. Written by the next redeploy or model swap.",
    )
    current_revision = models.ForeignKey(
        "DeploymentRevision", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["host__name", "unit"]
        constraints = [
            models.UniqueConstraint(fields=["host", "unit"], name="deployment_host_unit"),
            models.UniqueConstraint(fields=["host", "port"], name="deployment_host_port"),
        ]

    def __str__(self) -> str:
        return f"{self.unit} on {self.host}"


class DeploymentRevision(models.Model):
    """One immutable version of a deployment: the rendered unit file, its hash, the model and
    arguments, who created it and from which change."""

    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="revisions")
    # Given when the unit is first written to the host (or adopted from it): a requested
    # revision that was rejected, cancelled or drifted never served, and takes no number.
    number = models.PositiveIntegerField(null=True, blank=True)
    model = models.ForeignKey(ModelArtifact, on_delete=models.PROTECT, related_name="+")
    engine_binary = models.CharField(max_length=300, validators=[validators.validate_abs_path])
    tensor_parallel_size = models.PositiveSmallIntegerField()
    max_model_len = models.PositiveIntegerField()
    port = models.PositiveIntegerField()
    # Empty: the command line has no --host, so the engine listens on its default.
    bind_address = models.CharField(max_length=45, default="127.0.0.1", blank=True)
    extra_args = models.JSONField(default=list, blank=True, validators=[validate_extra_args])
    environment = models.JSONField(default=dict, blank=True)  # its Environment= assignments
    # The drain grace its unit gives the engine (vLLM's --shutdown-timeout; 0: none).
    drain_grace_seconds = models.PositiveIntegerField(default=0)
    # Variables its EnvironmentFile= set when it was adopted (secrets redacted): they expand
    # ${MODEL} and the like in its command line.
    file_variables = models.JSONField(default=dict, blank=True)
    unit_text = models.TextField()  # the exact bytes written to (or adopted from) the host
    unit_sha256 = models.CharField(max_length=64)
    # False when adopted from a unit holding secrets, which the probe redacts: such a unit
    # cannot be written back byte for byte, so no change may write or rewrite it.
    exact_bytes = models.BooleanField(default=True)
    created_by = models.CharField(max_length=200)
    created_from_change = models.ForeignKey(
        "ChangeRequest", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Measured throughput through the server's completions endpoint (tokens/s), set once.
    benchmark = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["deployment", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["deployment", "number"], name="revision_number"),
        ]

    def __str__(self) -> str:
        return f"{self.deployment.unit} {self.label} ({self.model})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # The content is immutable; only the one-time benchmark result may be added later.
        if not self._state.adding and kwargs.get("update_fields") != ["benchmark"]:
            raise ValueError("deployment revisions are immutable")
        super().save(*args, **kwargs)

    @property
    def label(self) -> str:
        return f"r{self.number}" if self.number is not None else "a new revision (not written yet)"

    @property
    def plan(self) -> ServingPlan:
        """What this revision's unit serves, read as the engine reads it."""
        return unit_plan(self.unit_text, self.file_variables)


class ChangeRequest(models.Model):
    """A destructive action on a deployment, decided on one snapshot of its host."""

    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="changes")
    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="changes")
    kind = models.CharField(max_length=20, choices=ChangeKind.choices)
    snapshot = models.ForeignKey(StateSnapshot, on_delete=models.PROTECT, related_name="+")
    from_revision = models.ForeignKey(
        DeploymentRevision, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    target_revision = models.ForeignKey(
        DeploymentRevision, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    params = models.JSONField(default=dict, blank=True)
    params_digest = models.CharField(max_length=64)
    reason = models.TextField()
    requested_by = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, related_name="change_requests"
    )
    requested_by_name = models.CharField(max_length=150)
    needs_approval = models.BooleanField()
    busy_acknowledged = models.BooleanField(default=False)
    status = models.CharField(
        max_length=20, choices=ChangeStatus.choices, default=ChangeStatus.PENDING_APPROVAL
    )
    status_reason = models.TextField(blank=True)
    drift_report = models.JSONField(default=list, blank=True)
    # Where the job left the host's place in the load balancer's rotation (a drained change):
    # `draining` is written before the drain hook is sent, so recovery can say a dead job's
    # host may still be out of rotation.
    drain_state = models.CharField(
        max_length=20, choices=DrainState.choices, default=DrainState.NONE, blank=True
    )
    cancel_requested = models.BooleanField(default=False)
    correlation_id = models.CharField(max_length=64)
    before_snapshot = models.ForeignKey(
        StateSnapshot, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    after_snapshot = models.ForeignKey(
        StateSnapshot, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # The host as verification found it failing, taken before the previous revision is restored
    # (after_snapshot is then the restored state).
    failure_snapshot = models.ForeignKey(
        StateSnapshot, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # One destructive job per host, enforced by the database itself.
            models.UniqueConstraint(
                fields=["host"],
                condition=models.Q(status__in=["queued", "running"]),
                name="one_active_job_per_host",
            ),
        ]
        indexes = [
            # the approvals queue, oldest first
            models.Index(fields=["status", "created_at"], name="change_status_created"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.get_kind_display()} {self.deployment.unit} on {self.host}"

    @property
    def rests_on_partial(self) -> bool:
        """The requester acknowledged unknown facts, so partial snapshots may back it."""
        return "acknowledged_unknown" in (self.params or {})

    def valid_approval(self, now: dt.datetime) -> Approval | None:
        """The approval that lets this change run at `now`, if any (Approval.is_valid)."""
        return self.approvals.valid(now).order_by("-created_at").first()

    def latest_grant(self) -> Approval | None:
        """The last approval or break-glass given, valid or not: what a refusal explains."""
        return self.approvals.grants().order_by("-created_at").first()


class ApprovalQuerySet(models.QuerySet["Approval"]):
    def grants(self) -> ApprovalQuerySet:
        """Approvals and break-glass: the decisions that let a change run."""
        return self.filter(decision__in=GRANTS)

    def valid(self, now: dt.datetime) -> ApprovalQuerySet:
        """The grants that still count at `now`: Approval.is_valid, in SQL."""
        return self.grants().filter(
            voided_at__isnull=True,
            expires_at__gt=now,
            params_digest=models.F("change__params_digest"),
        )


class Approval(models.Model):
    """A second person's decision, bound to the request's parameters and to the snapshot the
    approver saw. A grant (approval or break-glass) stops counting when it expires, when it is
    voided (a later probe differs materially), or when the change's parameters are no longer
    the ones it was given for; a rejection never counts and never expires."""

    change = models.ForeignKey(ChangeRequest, on_delete=models.PROTECT, related_name="approvals")
    approver = models.ForeignKey(User, on_delete=models.SET_NULL, null=True, related_name="+")
    approver_name = models.CharField(max_length=150)
    decision = models.CharField(max_length=12, choices=ApprovalDecision.choices)
    reason = models.TextField(blank=True)
    snapshot = models.ForeignKey(StateSnapshot, on_delete=models.PROTECT, related_name="+")
    snapshot_digest = models.CharField(max_length=64)
    params_digest = models.CharField(max_length=64)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a grant stops counting; none for a rejection, which never expires.",
    )
    voided_at = models.DateTimeField(null=True, blank=True)
    void_reason = models.TextField(blank=True)

    objects = ApprovalQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # A grant always expires; a rejection never does.
            models.CheckConstraint(
                condition=models.Q(decision=ApprovalDecision.REJECTED, expires_at__isnull=True)
                | (
                    ~models.Q(decision=ApprovalDecision.REJECTED)
                    & models.Q(expires_at__isnull=False)
                ),
                name="approval_expires_unless_rejected",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_decision_display()} by {self.approver_name} on change #{self.change_id}"

    def lapse(self, now: dt.datetime) -> ApprovalLapse | None:
        """Why this does not let its change run at `now`, or None while it does.

        A voided grant is reported as voided unless it had already expired when it was voided;
        a grant bound to parameters other than its change's counts as voided too.
        """
        if self.decision not in GRANTS:
            return ApprovalLapse.REJECTED
        if self.params_digest != self.change.params_digest:
            return ApprovalLapse.VOIDED
        expired = self.expires_at is None or self.expires_at <= now
        if self.voided_at is not None:
            expired_first = expired and (
                self.expires_at is None or self.expires_at <= self.voided_at
            )
            return ApprovalLapse.EXPIRED if expired_first else ApprovalLapse.VOIDED
        return ApprovalLapse.EXPIRED if expired else None

    def is_valid(self, now: dt.datetime) -> bool:
        """Whether this lets its change run at `now` (ApprovalQuerySet.valid is the same rule in
        SQL): a grant, not voided, for the change's parameters, and `now` before it expires."""
        return self.lapse(now) is None


class JobStep(models.Model):
    """One logged step of a change job, with the command it ran and what came back."""

    change = models.ForeignKey(ChangeRequest, on_delete=models.PROTECT, related_name="steps")
    seq = models.PositiveIntegerField()
    name = models.CharField(max_length=100)
    status = models.CharField(max_length=10, choices=StepStatus.choices)
    command = models.TextField(blank=True)
    output = models.TextField(blank=True)
    exit_status = models.IntegerField(null=True, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["change", "seq"]
        constraints = [models.UniqueConstraint(fields=["change", "seq"], name="step_seq")]

    def __str__(self) -> str:
        return f"{self.seq}. {self.name} ({self.status})"

    @property
    def duration_seconds(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()

    @property
    def output_shown(self) -> str:
        """The output as pages and the API show it: redacted again, since steps stored before
        their output was redacted on the way in are immutable history."""
        return redact_text(self.output)


class HostLease(models.Model):
    """Who may send destructive commands to a host right now.

    Taking the lease bumps `fencing_token`; the job re-checks its token before every SSH command
    and renews the lease while each command runs (deployments/lease.py), so a worker that was
    paused, partitioned or superseded can never act on a stale lease, and a live one never loses
    it mid-command.
    """

    host = models.OneToOneField(
        Host, on_delete=models.CASCADE, primary_key=True, related_name="lease"
    )
    holder = models.ForeignKey(
        ChangeRequest, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    fencing_token = models.BigIntegerField(default=0)
    expires_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)  # the holder's last renewal

    def __str__(self) -> str:
        return f"lease on {self.host_id}: change {self.holder_id} token {self.fencing_token}"


# The evaluation and rollout rows and the drain hooks live in their own modules; importing them
# here registers them with this app and lets the rest of the product import every row from here.
from .drain_hooks import DrainHook  # noqa: E402
from .evaluation.models import BenchmarkProfile, CoherenceCheck, Evaluation  # noqa: E402
from .rollouts.models import Rollout, RolloutApproval, RolloutHost  # noqa: E402

__all__ = [
    "Approval",
    "BenchmarkProfile",
    "ChangeRequest",
    "CoherenceCheck",
    "Deployment",
    "DeploymentRevision",
    "DrainHook",
    "Evaluation",
    "HostLease",
    "JobStep",
    "ModelArtifact",
    "Rollout",
    "RolloutApproval",
    "RolloutHost",
]
