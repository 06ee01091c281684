"""The rows of a rollout: the rollout itself, each host it goes to, and the one approval it
needs. Re-exported by deployments.models, which registers them with the app.

Rows of the deployments app are named by string ("deployments.ChangeRequest"), so this module
does not import deployments.models, which imports it.
"""

from __future__ import annotations

import datetime as dt

from django.contrib.auth.models import User
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from controlplane.accounts.models import HostGroup
from hosts.models import Host, StateSnapshot

from ..choices import ApprovalDecision, ChangeKind
from ..drain_hooks import DEADLINE_MAX_SECONDS as DRAIN_DEADLINE_MAX_SECONDS
from ..drain_hooks import DEADLINE_MIN_SECONDS as DRAIN_DEADLINE_MIN_SECONDS
from .choices import GateCheck, RolloutHostStatus, RolloutStatus, WaveUnit

MAX_DEADLINE_SECONDS = 7 * 86400


class Rollout(models.Model):
    """One change (a model swap, redeploy, engine repair or restart) across many hosts, in
    waves: a canary of one host, then waves of `wave_size` hosts (or per cent of them), at most
    `max_down` hosts changing at once. Each host is changed through its own change request on
    its own fresh snapshot, granted under this rollout's one approval."""

    kind = models.CharField(max_length=20, choices=ChangeKind.choices)
    # What each host's change request carries (deployments.services.change_request_create).
    model = models.ForeignKey(
        "deployments.ModelArtifact",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    tensor_parallel_size = models.PositiveSmallIntegerField(null=True, blank=True)
    max_model_len = models.PositiveIntegerField(null=True, blank=True)
    extra_args = models.JSONField(null=True, blank=True)
    environment = models.JSONField(null=True, blank=True)
    acknowledge_busy = models.BooleanField(
        default=False,
        help_text="Hosts may be serving requests; their changes drop them (draining: those "
        "still running when the drain deadline passes).",
    )
    # Drain first (deployments.execution.drain): each host's change, and its rollback, names
    # this hook. Copied by name and digest when requested, as `benchmark` copies its profile:
    # the approval binds to what the hook runs, and the rollout stops if an administrator
    # edits, disables or deletes it afterwards (orchestrator._approval_problem).
    drain_hook = models.ForeignKey(
        "deployments.DrainHook",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    drain_hook_name = models.CharField(max_length=64, blank=True)
    drain_hook_digest = models.CharField(max_length=64, blank=True)
    drain_deadline_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[
            MinValueValidator(DRAIN_DEADLINE_MIN_SECONDS),
            MaxValueValidator(DRAIN_DEADLINE_MAX_SECONDS),
        ],
        help_text="How long each host's job waits for its requests in flight to finish.",
    )
    benchmark_profile = models.ForeignKey(
        "deployments.BenchmarkProfile",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    # The profile's definition when the rollout was requested: what the approval binds to, and
    # what each host's change must carry.
    benchmark = models.JSONField(null=True, blank=True)
    benchmark_margin_pct = models.PositiveSmallIntegerField(
        default=10,
        validators=[MaxValueValidator(90)],
        help_text="A wave passes when each host's throughput is at least 100 - this per cent "
        "of its own baseline (the same benchmark before its change).",
    )
    # The selection: a host group as it was when requested (its hosts are copied into
    # RolloutHost rows), or a list of hosts.
    host_group = models.ForeignKey(
        HostGroup, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    host_group_name = models.CharField(max_length=63, blank=True)
    # Which unit on each host; empty: each host's one deployment.
    unit = models.CharField(max_length=200, blank=True)
    wave_size = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    wave_unit = models.CharField(max_length=10, choices=WaveUnit.choices, default=WaveUnit.HOSTS)
    max_down = models.PositiveSmallIntegerField(validators=[MinValueValidator(1)])
    progress_deadline_seconds = models.PositiveIntegerField(
        validators=[MinValueValidator(60), MaxValueValidator(MAX_DEADLINE_SECONDS)],
        help_text="The rollout halts when no host finishes its turn for this long.",
    )
    waves = models.PositiveSmallIntegerField(default=1)
    current_wave = models.PositiveSmallIntegerField(default=0)
    reason = models.TextField()
    requested_by = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, related_name="rollouts"
    )
    requested_by_name = models.CharField(max_length=150)
    status = models.CharField(
        max_length=20, choices=RolloutStatus.choices, default=RolloutStatus.PENDING_APPROVAL
    )
    status_reason = models.TextField(blank=True)
    params_digest = models.CharField(max_length=64)
    correlation_id = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # When a host last finished its turn, a wave started or the rollout resumed: the progress
    # deadline counts from here.
    progress_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # the beat sweep: rollouts a worker still looks after
            models.Index(fields=["status"], name="rollout_status"),
        ]

    def __str__(self) -> str:
        return f"rollout #{self.pk} ({self.get_kind_display()})"

    @property
    def label(self) -> str:
        what = self.get_kind_display()
        if self.model_id is not None:
            what += f" to {self.model}"
        return what

    def approval(self) -> RolloutApproval | None:
        """The grant this rollout runs under, if it was approved."""
        return (
            self.approvals.filter(decision=ApprovalDecision.APPROVED)
            .select_related("approver")
            .order_by("-created_at")
            .first()
        )


class RolloutHost(models.Model):
    """One host of a rollout: its wave, what it served when the rollout was approved, and what
    became of it (skipped and why, the change made for it, which check it failed, the change
    that rolled it back)."""

    rollout = models.ForeignKey(Rollout, on_delete=models.PROTECT, related_name="hosts")
    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="+")
    deployment = models.ForeignKey(
        "deployments.Deployment", on_delete=models.PROTECT, related_name="+"
    )
    position = models.PositiveIntegerField()  # the order hosts are taken in
    wave = models.PositiveSmallIntegerField()  # 0 is the canary
    status = models.CharField(
        max_length=20, choices=RolloutHostStatus.choices, default=RolloutHostStatus.PENDING
    )
    # What it served when the rollout was approved (the approval's digest covers these).
    approved_snapshot = models.ForeignKey(
        StateSnapshot, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    approved_revision = models.ForeignKey(
        "deployments.DeploymentRevision",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    approved_unit_sha256 = models.CharField(max_length=64, blank=True)
    approved_models = models.JSONField(default=list, blank=True)
    skip_reason = models.TextField(blank=True)
    # Which check it failed, when one did.
    gate_check = models.CharField(max_length=20, blank=True, choices=GateCheck.choices)
    gate_failure = models.TextField(blank=True)  # which check failed, in words
    gate = models.JSONField(default=dict, blank=True)  # each check's figures
    # Made in the same transaction that moves the host to running, so a worker killed at any
    # point never makes a second change for the host (unique: one row names it).
    change = models.OneToOneField(
        "deployments.ChangeRequest",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="rollout_host",
    )
    rollback_change = models.OneToOneField(
        "deployments.ChangeRequest",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="rollout_rollback_of",
    )
    # A worker taking the host's turn (probe, check, request) holds it with a token, renewed
    # while it probes; one that died leaves a claim that lapses (ROLLOUT_CLAIM_SECONDS).
    claim_token = models.CharField(max_length=32, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["rollout", "position"]
        constraints = [
            models.UniqueConstraint(fields=["rollout", "host"], name="rollout_host_once"),
        ]
        indexes = [
            # a rollout's hosts by status (the orchestrator's every look)
            models.Index(fields=["rollout", "status"], name="rollout_host_status"),
        ]

    def __str__(self) -> str:
        return f"{self.host_id} in rollout {self.rollout_id}: {self.status}"

    def claimed(self, now: dt.datetime, lapse_seconds: float) -> bool:
        """A worker is taking this host's turn (its claim has not lapsed)."""
        if not self.claim_token or self.claimed_at is None:
            return False
        return (now - self.claimed_at).total_seconds() < lapse_seconds


class RolloutApproval(models.Model):
    """A second person's decision on a whole rollout, bound to its parameters (params_digest)
    and to what each host served when they decided (hosts_digest, over the RolloutHost
    approved_* fields). A grant must start the rollout before `expires_at`; a rejection never
    expires."""

    rollout = models.ForeignKey(Rollout, on_delete=models.PROTECT, related_name="approvals")
    approver = models.ForeignKey(User, on_delete=models.SET_NULL, null=True, related_name="+")
    approver_name = models.CharField(max_length=150)
    decision = models.CharField(max_length=12, choices=ApprovalDecision.choices)
    reason = models.TextField()
    params_digest = models.CharField(max_length=64)
    hosts_digest = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(decision=ApprovalDecision.REJECTED, expires_at__isnull=True)
                | models.Q(decision=ApprovalDecision.APPROVED, expires_at__isnull=False),
                name="rollout_approval_expires_unless_rejected",
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.get_decision_display()} by {self.approver_name} on rollout #{self.rollout_id}"
        )
