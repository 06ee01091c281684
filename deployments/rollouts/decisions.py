"""People's decisions on a rollout: approve (once, for every host), reject, pause, resume,
abort. Each takes the rollout's row lock and moves it through deployments.rollouts.lifecycle;
what workers then do is deployments.rollouts.orchestrator's."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from controlplane.audit import reasons
from controlplane.audit.actions import AuditAction
from hosts import selectors as host_selectors
from hosts import services as host_services

from .. import dispatch
from ..choices import ApprovalDecision
from . import lifecycle
from .access import RolloutRefused, rollout_control_allowed, rollout_decide_allowed
from .choices import RolloutHostStatus, RolloutStatus
from .models import Rollout, RolloutApproval, RolloutHost
from .requests import rollout_drain_problem, rollout_hosts_digest, rollout_params_digest

H = RolloutHostStatus


def _reason(reason: str, what: str) -> str:
    try:
        return reasons.validate_reason(reason, what=what)
    except ValidationError as exc:
        raise RolloutRefused(exc.messages[0]) from exc


def _locked(rollout: Rollout, *expected: str) -> Rollout:
    locked = Rollout.objects.select_for_update().get(pk=rollout.pk)
    if locked.status not in expected:
        raise RolloutRefused(
            f"rollout #{locked.pk} is {locked.get_status_display()}", code="conflict"
        )
    return locked


def rollout_approve(
    *, rollout: Rollout, approver: Any, reason: str, now: dt.datetime | None = None
) -> Rollout:
    """Approve a rollout for every host it names, bound to its parameters and to what each host
    serves now: its newest snapshot, which must be fresh (SNAPSHOT_MAX_AGE_SECONDS) and ok. A
    host without one is skipped and reported, not approved blind. The rollout must start
    before the approval expires (APPROVAL_TTL_SECONDS); a worker starts it at once."""
    rollout_decide_allowed(user=approver, rollout=rollout)
    if rollout.requested_by_id == approver.pk:
        raise RolloutRefused(
            "the two-person rule: you cannot approve your own rollout", code="forbidden"
        )
    reason = _reason(reason, "an approval")
    now = now or timezone.now()
    with transaction.atomic():
        rollout = _locked(rollout, RolloutStatus.PENDING_APPROVAL)
        if rollout.params_digest != rollout_params_digest(rollout):
            raise RolloutRefused(
                "the rollout's parameters changed after it was requested", code="conflict"
            )
        drain_problem = rollout_drain_problem(rollout)
        if drain_problem is not None:
            # The approver would grant a hook nobody requested: the rollout is asked for again.
            raise RolloutRefused(f"{drain_problem}: request it again", code="conflict")
        bound, skipped = _bind_serving_state(rollout, approver, now)
        if not bound:
            raise RolloutRefused(
                "no host of the rollout has a fresh ok snapshot to approve on: "
                + "; ".join(skipped)
                + ". Probe them and review again.",
                code="stale",
            )
        hosts_digest = rollout_hosts_digest(rollout)
        ttl = settings.APPROVAL_TTL_SECONDS
        RolloutApproval.objects.create(
            rollout=rollout,
            approver=approver,
            approver_name=approver.get_username(),
            decision=ApprovalDecision.APPROVED,
            reason=reason,
            params_digest=rollout.params_digest,
            hosts_digest=hosts_digest,
            created_at=now,
            expires_at=now + dt.timedelta(seconds=ttl),
        )
        lifecycle.rollout_transition(
            rollout=rollout,
            source=RolloutStatus.PENDING_APPROVAL,
            target=RolloutStatus.APPROVED,
            action=AuditAction.ROLLOUT_APPROVED,
            actor=approver,
            data={
                "reason": reason,
                "params_digest": rollout.params_digest,
                "hosts_digest": hosts_digest,
                "hosts": bound,
                "skipped": skipped,
                "start_within_seconds": ttl,
            },
            now=now,
        )
        dispatch.rollout_advance_on_commit(rollout.pk)
    return rollout


def _bind_serving_state(
    rollout: Rollout, approver: Any, now: dt.datetime
) -> tuple[list[str], list[str]]:
    """Record on each host what it serves now (its newest snapshot, the unit file's hash, the
    models served, the deployment's revision); skip those whose newest snapshot may not back a
    decision. Returns the hosts bound and the reasons of those skipped."""
    bound: list[str] = []
    skipped: list[str] = []
    hosts = rollout.hosts.filter(status=H.PENDING).select_related("host", "deployment", "rollout")
    for rh in hosts:
        snapshot = host_selectors.latest_snapshot(rh.host)
        why = None
        if snapshot is None:
            why = "it has never been probed"
        else:
            try:
                host_services.snapshot_require_fresh(snapshot=snapshot, host=rh.host, now=now)
            except host_services.SnapshotNotUsable as exc:
                why = exc.message
        dep = snapshot.state().deployments.get(rh.deployment.unit) if snapshot else None
        if why is None and dep is None:
            why = f"snapshot #{snapshot.pk if snapshot else '-'} does not show {rh.deployment.unit}"
        if why is not None:
            text = f"not reviewable when the rollout was approved: {why}"
            lifecycle.rollout_host_transition(
                rollout_host=rh,
                source=H.PENDING,
                target=H.SKIPPED,
                action=AuditAction.ROLLOUT_HOST_SKIPPED,
                actor=approver,
                data={"reason": text},
                fields={"skip_reason": text},
                now=now,
            )
            skipped.append(f"{rh.host.name}: {why}")
            continue
        assert snapshot is not None and dep is not None
        RolloutHost.objects.filter(pk=rh.pk).update(
            approved_snapshot=snapshot,
            approved_revision=rh.deployment.current_revision_id,
            approved_unit_sha256=dep.unit_file_sha256 or "",
            approved_models=sorted(dep.server.models),
        )
        bound.append(rh.host.name)
    return bound, skipped


def rollout_reject(*, rollout: Rollout, approver: Any, reason: str) -> Rollout:
    rollout_decide_allowed(user=approver, rollout=rollout)
    reason = _reason(reason, "a rejection")
    now = timezone.now()
    with transaction.atomic():
        rollout = _locked(rollout, RolloutStatus.PENDING_APPROVAL)
        RolloutApproval.objects.create(
            rollout=rollout,
            approver=approver,
            approver_name=approver.get_username(),
            decision=ApprovalDecision.REJECTED,
            reason=reason,
            params_digest=rollout.params_digest,
            created_at=now,
            expires_at=None,
        )
        lifecycle.rollout_transition(
            rollout=rollout,
            source=RolloutStatus.PENDING_APPROVAL,
            target=RolloutStatus.REJECTED,
            action=AuditAction.ROLLOUT_REJECTED,
            actor=approver,
            reason=reason,
            now=now,
        )
        lifecycle.rollout_hosts_not_reached(rollout=rollout, now=now)
    return rollout


def rollout_pause(*, rollout: Rollout, user: Any, reason: str = "") -> Rollout:
    """No host is started while paused; changes under way finish, and their checks still count
    (a failure halts the rollout and rolls its wave back even while paused)."""
    rollout_control_allowed(user=user, rollout=rollout)
    with transaction.atomic():
        rollout = _locked(rollout, RolloutStatus.RUNNING)
        lifecycle.rollout_transition(
            rollout=rollout,
            source=RolloutStatus.RUNNING,
            target=RolloutStatus.PAUSED,
            action=AuditAction.ROLLOUT_PAUSED,
            actor=user,
            reason=reason.strip() or f"paused by {user.get_username()}",
        )
    return rollout


def rollout_resume(*, rollout: Rollout, user: Any, reason: str = "") -> Rollout:
    """Carry on where it stopped; the progress deadline counts again from now. Each host still
    has to match what was approved when its turn comes."""
    rollout_control_allowed(user=user, rollout=rollout)
    with transaction.atomic():
        rollout = _locked(rollout, RolloutStatus.PAUSED)
        lifecycle.rollout_transition(
            rollout=rollout,
            source=RolloutStatus.PAUSED,
            target=RolloutStatus.RUNNING,
            action=AuditAction.ROLLOUT_RESUMED,
            actor=user,
            reason=reason.strip() or f"resumed by {user.get_username()}",
            fields={"progress_at": timezone.now()},
        )
        dispatch.rollout_advance_on_commit(rollout.pk)
    return rollout


def rollout_abort(*, rollout: Rollout, user: Any, reason: str) -> Rollout:
    """Stop for good: no other host is started. A change already running on a host finishes by
    itself (its own verification restores the previous revision if it fails); hosts that
    passed keep what they got. A halting rollout cannot be aborted: its rollback is under way."""
    rollout_control_allowed(user=user, rollout=rollout)
    reason = _reason(reason, "aborting a rollout")
    abortable = (
        RolloutStatus.PENDING_APPROVAL,
        RolloutStatus.APPROVED,
        RolloutStatus.RUNNING,
        RolloutStatus.PAUSED,
    )
    with transaction.atomic():
        locked = Rollout.objects.select_for_update().get(pk=rollout.pk)
        if locked.status == RolloutStatus.HALTING:
            raise RolloutRefused(
                f"rollout #{locked.pk} is rolling back the wave that failed; it cannot be "
                "aborted until that ends",
                code="conflict",
            )
        rollout = _locked(locked, *abortable)
        lifecycle.rollout_transition(
            rollout=rollout,
            source=abortable,
            target=RolloutStatus.ABORTED,
            action=AuditAction.ROLLOUT_ABORTED,
            actor=user,
            reason=reason,
        )
        lifecycle.rollout_hosts_not_reached(rollout=rollout)
    return rollout
