"""A rollout's statuses, its hosts' statuses, and what a rollout may carry."""

from __future__ import annotations

from django.db import models

from ..choices import ChangeKind


class RolloutStatus(models.TextChoices):
    PENDING_APPROVAL = "pending_approval", "waiting for approval"
    REJECTED = "rejected", "rejected"
    # Approved, and not yet started by a worker: the approval expires if it is not in time.
    APPROVED = "approved", "approved, starting"
    RUNNING = "running", "running"
    PAUSED = "paused", "paused"
    # A wave failed a check (or the progress deadline passed): no other host is started, the
    # changes under way end, then the wave's changed hosts are rolled back.
    HALTING = "halting", "halted, rolling back"
    HALTED = "halted", "halted and rolled back"
    SUCCEEDED = "succeeded", "succeeded"
    ABORTED = "aborted", "aborted"
    FAILED = "failed", "failed"


# A rollout a worker still looks after (the beat sweep advances these).
ACTIVE_ROLLOUT_STATUSES = (
    RolloutStatus.APPROVED,
    RolloutStatus.RUNNING,
    RolloutStatus.PAUSED,
    RolloutStatus.HALTING,
)
# Ones that may still touch a host: a host may be in one of these at a time.
OPEN_ROLLOUT_STATUSES = (RolloutStatus.PENDING_APPROVAL, *ACTIVE_ROLLOUT_STATUSES)
FINAL_ROLLOUT_STATUSES = tuple(s for s in RolloutStatus if s not in OPEN_ROLLOUT_STATUSES)


class RolloutHostStatus(models.TextChoices):
    PENDING = "pending", "waiting for its turn"
    RUNNING = "running", "changing"
    SUCCEEDED = "succeeded", "changed, checks passed"
    # Its change ended badly or did not pass a check (gate_failure says which).
    FAILED = "failed", "failed a check"
    # Left alone: it no longer matched what was approved, or its change was refused.
    SKIPPED = "skipped", "skipped"
    # The rollout ended before its turn came.
    NOT_REACHED = "not_reached", "not reached"
    ROLLBACK_PENDING = "rollback_pending", "to be rolled back"
    ROLLING_BACK = "rolling_back", "rolling back"
    # Back on the revision it served before: by the rollout's rollback change, or by its own
    # change's job, which restores the previous revision when verification fails.
    ROLLED_BACK = "rolled_back", "rolled back"
    ROLLBACK_FAILED = "rollback_failed", "not rolled back"


# A host whose change is under way: what "hosts down at once" counts.
BUSY_HOST_STATUSES = (RolloutHostStatus.RUNNING, RolloutHostStatus.ROLLING_BACK)
# A host whose turn is over, for the wave it is in.
DONE_HOST_STATUSES = (
    RolloutHostStatus.SUCCEEDED,
    RolloutHostStatus.FAILED,
    RolloutHostStatus.SKIPPED,
    RolloutHostStatus.ROLLED_BACK,
    RolloutHostStatus.ROLLBACK_PENDING,
    RolloutHostStatus.ROLLING_BACK,
    RolloutHostStatus.ROLLBACK_FAILED,
)


class WaveUnit(models.TextChoices):
    HOSTS = "hosts", "hosts"
    PERCENT = "percent", "% of the hosts"


class GateCheck(models.TextChoices):
    """Which check a host did not pass (RolloutHost.gate_check)."""

    CHANGE = "change", "the change itself"
    COHERENCE = "coherence", "coherence suite"
    BENCHMARK = "benchmark", "benchmark against the host's baseline"


# What a rollout may carry out: the kinds an engineer takes across a fleet. A stop leaves hosts
# serving nothing (not a rollout), a start has nothing to start on healthy hosts, and a rollback
# is what a halted rollout does by itself.
ROLLOUT_KINDS = (
    ChangeKind.MODEL_SWAP,
    ChangeKind.REDEPLOY,
    ChangeKind.ENGINE_REPAIR,
    ChangeKind.RESTART,
)
