"""Deciding on changes: request, approve, reject, break glass, cancel, and the rules around them.

Every function here enforces the rules itself; views and the API only parse input and call them.
Execution lives in deployments.runner.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from controlplane.accounts.roles import APPROVER, OPERATOR, has_role
from controlplane.audit import context as audit_context
from controlplane.audit import reasons
from controlplane.audit import services as audit
from hosts import commands
from hosts import services as host_services
from hosts.choices import HostKeyStatus
from hosts.models import StateSnapshot
from hosts.state import HostState, fingerprint_drift

from . import engine_flags, policy, preflight, revisions
from .choices import (
    ACTIVE_JOB_STATUSES,
    SERVING_KINDS,
    ApprovalDecision,
    ChangeKind,
    ChangeStatus,
)
from .models import Approval, ChangeRequest, Deployment, ModelArtifact


class ChangeRefused(Exception):
    """A rule refused the action. `code` is one of: stale, forbidden, conflict, invalid."""

    def __init__(self, message: str, *, code: str = "invalid", **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.details = details


def _stale(exc: host_services.SnapshotNotUsable) -> ChangeRefused:
    return ChangeRefused(exc.message, code="stale", age_seconds=exc.age_seconds, limit=exc.limit)


def _canonical_digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# --- pre-flight ----------------------------------------------------------------------------------


@dataclass
class Preflight:
    fit: preflight.FitCheck | None = None
    inflight: float | None = None
    busy: bool = False
    active_job: ChangeRequest | None = None
    problems: list[str] = field(default_factory=list)  # refusals
    warnings: list[str] = field(default_factory=list)  # need an explicit acknowledgement


def change_preflight(
    *, deployment: Deployment, target: revisions.ChangeTarget, snapshot: StateSnapshot
) -> Preflight:
    """What the snapshot says about carrying out `target`: trust, one job per host, fit at the
    parallelism the target unit will run, and requests in flight."""
    result = Preflight()
    host = deployment.host
    kind = target.kind
    if host.host_key_status != HostKeyStatus.PINNED:
        result.problems.append("the host key is not pinned: every command to this host is blocked")
    result.active_job = ChangeRequest.objects.filter(
        host=host, status__in=ACTIVE_JOB_STATUSES
    ).first()
    if result.active_job is not None:
        result.problems.append(
            f"change #{result.active_job.pk} is {result.active_job.status} on {host.name}; "
            "one job per host at a time"
        )
    state = snapshot.state()
    if kind in SERVING_KINDS:
        result.fit = fit_check(deployment=deployment, target=target, state=state)
        if not result.fit.fits:
            result.problems.append(f"{target.model} {result.fit.message}")
    if kind != ChangeKind.START:
        result.inflight = preflight.inflight_requests(state, deployment.unit)
        if result.inflight:
            result.busy = True
            result.warnings.append(
                f"the server has {result.inflight:.0f} requests in flight; acting now drops them"
            )
    return result


def fit_check(
    *, deployment: Deployment, target: revisions.ChangeTarget, state: HostState
) -> preflight.FitCheck:
    return preflight.model_fits(
        state=state,
        weights_gib=target.model.weights_gib,
        plan=target.plan,
        unit=deployment.unit,
        kv_reserve_gib=settings.KV_CACHE_RESERVE_GIB,
    )


# --- requesting --------------------------------------------------------------------------------


def _require_role(user: Any, role: str, action: str) -> None:
    if not has_role(user, role):
        raise ChangeRefused(f"{action} needs the {role} role", code="forbidden")


def _require_reason(reason: str, what: str, *, minimum: int = 1) -> str:
    try:
        return reasons.validate_reason(reason, what=what, minimum=minimum)
    except ValidationError as exc:
        raise ChangeRefused(exc.messages[0]) from exc


def change_target_for(
    *,
    deployment: Deployment,
    kind: str,
    model: ModelArtifact | None = None,
    tensor_parallel_size: int | None = None,
    max_model_len: int | None = None,
    extra_args: list[str] | None = None,
) -> revisions.ChangeTarget:
    """What the change would serve, or a refusal naming the argument at fault."""
    try:
        return revisions.change_target(
            deployment=deployment,
            kind=kind,
            model=model,
            tensor_parallel_size=tensor_parallel_size,
            max_model_len=max_model_len,
            extra_args=extra_args,
        )
    except engine_flags.EngineArgRefused as exc:
        raise ChangeRefused(f"extra arguments: {exc}") from exc
    except revisions.NoRollbackTarget as exc:
        raise ChangeRefused(str(exc)) from exc
    except commands.UnsafeCommand as exc:  # a stored row that bypassed validation
        raise ChangeRefused(f"the deployment's stored fields cannot be rendered: {exc}") from exc


def change_request_create(
    *,
    user: Any,
    deployment: Deployment,
    kind: str,
    snapshot: StateSnapshot,
    reason: str,
    model: ModelArtifact | None = None,
    tensor_parallel_size: int | None = None,
    max_model_len: int | None = None,
    extra_args: list[str] | None = None,
    acknowledge_busy: bool = False,
    benchmark: bool = False,
) -> ChangeRequest:
    _require_role(user, OPERATOR, "Requesting a change")
    if kind not in ChangeKind.values:
        raise ChangeRefused(f"unknown change kind {kind!r}")
    reason = _require_reason(reason, "a change request")
    if kind == ChangeKind.MODEL_SWAP and (model is None or model.pk == deployment.model_id):
        raise ChangeRefused("a model swap needs a different model from the catalog")
    host = deployment.host
    try:
        age = host_services.snapshot_require_fresh(snapshot=snapshot, host=host)
    except host_services.SnapshotNotUsable as exc:
        raise _stale(exc) from exc
    with transaction.atomic():
        deployment = (
            Deployment.objects.select_for_update()
            .select_related("host", "model")
            .get(pk=deployment.pk)
        )
        target = change_target_for(
            deployment=deployment,
            kind=kind,
            model=model,
            tensor_parallel_size=tensor_parallel_size,
            max_model_len=max_model_len,
            extra_args=extra_args,
        )
        checks = change_preflight(deployment=deployment, target=target, snapshot=snapshot)
        if checks.problems:
            raise ChangeRefused("; ".join(checks.problems), code="conflict")
        if checks.busy and not acknowledge_busy:
            raise ChangeRefused(
                "; ".join(checks.warnings) + ". Acknowledge this explicitly to go ahead.",
                code="conflict",
                needs_acknowledgement=True,
            )
        because = policy.approval_reasons(
            kind=kind,
            current_unit_text=target.current.unit_text,
            target_unit_text=target.unit_text if target.writes_unit else None,
        )
        change = ChangeRequest(
            host=host,
            deployment=deployment,
            kind=kind,
            snapshot=snapshot,
            from_revision=target.current,
            target_revision=target.revision,
            reason=reason[:2000],
            requested_by=user,
            requested_by_name=user.get_username(),
            needs_approval=bool(because),
            busy_acknowledged=bool(checks.busy and acknowledge_busy),
            params={"benchmark": bool(benchmark), "approval_because": because},
            correlation_id=audit_context.current().correlation_id
            or audit_context.new_correlation_id(),
        )
        change.params_digest = ""
        change.status = (
            ChangeStatus.PENDING_APPROVAL if change.needs_approval else ChangeStatus.QUEUED
        )
        try:
            with transaction.atomic():
                change.save()
        except IntegrityError as exc:
            raise ChangeRefused(
                f"another job is queued or running on {host.name}", code="conflict"
            ) from exc
        if target.content is not None:
            assert target.number is not None
            change.target_revision = revisions.revision_create(
                deployment=deployment,
                content=target.content,
                number=target.number,
                created_by=user.get_username(),
                change=change,
            )
        change.params_digest = change_params_digest(change)
        change.save(update_fields=["target_revision", "params_digest"])
        audit.record(
            action="change.requested",
            actor=user,
            target=change,
            host=host,
            snapshot=snapshot,
            correlation_id=change.correlation_id,
            data={
                "kind": kind,
                "deployment": deployment.unit,
                "reason": change.reason,
                "from_revision": target.current.number,
                "target_revision": getattr(change.target_revision, "number", None),
                "target_model": str(target.model),
                "needs_approval": change.needs_approval,
                "approval_because": because,
                "snapshot_age_seconds": round(age, 3),
                "fit": getattr(checks.fit, "message", None),
                "inflight": checks.inflight,
            },
        )
        if checks.busy:
            audit.record(
                action="change.busy_acknowledged",
                actor=user,
                target=change,
                host=host,
                snapshot=snapshot,
                correlation_id=change.correlation_id,
                data={"inflight": checks.inflight, "warning": checks.warnings},
            )
        if change.status == ChangeStatus.QUEUED:
            _enqueue_on_commit(change)
    return change


def change_params_digest(change: ChangeRequest) -> str:
    """What an approval is bound to: the action, the target and the exact unit file."""
    return _canonical_digest(
        {
            "kind": change.kind,
            "host": change.host_id,
            "deployment": change.deployment_id,
            "from_unit": getattr(change.from_revision, "unit_sha256", None),
            "target_unit": getattr(change.target_revision, "unit_sha256", None),
            "params": change.params,
        }
    )


def _enqueue_on_commit(change: ChangeRequest) -> None:
    from .tasks import execute_change

    change_id = change.pk
    transaction.on_commit(lambda: execute_change.delay(change_id))


# --- approving -----------------------------------------------------------------------------------


def _lock_open(change: ChangeRequest, expected: str) -> ChangeRequest:
    locked = ChangeRequest.objects.select_for_update().select_related("host").get(pk=change.pk)
    if locked.status != expected:
        raise ChangeRefused(
            f"change #{locked.pk} is {locked.get_status_display()}, not "
            f"{ChangeStatus(expected).label}",
            code="conflict",
        )
    return locked


def change_request_approve(
    *, change: ChangeRequest, approver: Any, snapshot: StateSnapshot, reason: str = ""
) -> ChangeRequest:
    """Approve on the snapshot the approver saw; it must be fresh and materially the same."""
    _require_role(approver, APPROVER, "Approving a change")
    if change.requested_by_id == approver.pk:
        raise ChangeRefused(
            "the two-person rule: you cannot approve your own request", code="forbidden"
        )
    reason = _require_reason(reason, "an approval")
    return _grant(
        change=change, user=approver, snapshot=snapshot, reason=reason,
        decision=ApprovalDecision.APPROVED, action="change.approved", when="approval",
    )  # fmt: skip


def _grant(
    *,
    change: ChangeRequest,
    user: Any,
    snapshot: StateSnapshot,
    reason: str,
    decision: str,
    action: str,
    when: str,
    alert: bool = False,
) -> ChangeRequest:
    """Record an approval bound to the request's parameters and the snapshot `user` saw, and
    queue the job; or mark the request drifted if that snapshot differs materially."""
    with transaction.atomic():
        change = _lock_open(change, ChangeStatus.PENDING_APPROVAL)
        if change.params_digest != change_params_digest(change):
            raise ChangeRefused(
                "the request's parameters changed after it was made", code="conflict"
            )
        try:
            age = host_services.snapshot_require_fresh(snapshot=snapshot, host=change.host)
        except host_services.SnapshotNotUsable as exc:
            raise _stale(exc) from exc
        drift = fingerprint_drift(
            change.snapshot.material_fingerprint(), snapshot.material_fingerprint()
        )
        if drift:
            _mark_drifted(change, drift, snapshot=snapshot, actor=user, when=when)
            return change
        now = timezone.now()
        Approval.objects.create(
            change=change,
            approver=user,
            approver_name=user.get_username(),
            decision=decision,
            reason=reason[:2000],
            snapshot=snapshot,
            snapshot_digest=snapshot.digest,
            params_digest=change.params_digest,
            created_at=now,
            expires_at=now + dt.timedelta(seconds=settings.APPROVAL_TTL_SECONDS),
        )
        try:
            with transaction.atomic():
                change.status = ChangeStatus.QUEUED
                change.save(update_fields=["status"])
        except IntegrityError as exc:
            raise ChangeRefused(
                f"another job is queued or running on {change.host.name}; approve again once "
                "it has finished",
                code="conflict",
            ) from exc
        data = {
            "reason": reason,
            "snapshot_age_seconds": round(age, 3),
            "params_digest": change.params_digest,
            "expires_in_seconds": settings.APPROVAL_TTL_SECONDS,
        }
        if alert:
            data["alert"] = True
        audit.record(
            action=action,
            actor=user,
            target=change,
            host=change.host,
            snapshot=snapshot,
            correlation_id=change.correlation_id,
            data=data,
        )
        _enqueue_on_commit(change)
    return change


def change_request_reject(*, change: ChangeRequest, approver: Any, reason: str) -> ChangeRequest:
    _require_role(approver, APPROVER, "Rejecting a change")
    reason = _require_reason(reason, "a rejection")
    with transaction.atomic():
        change = _lock_open(change, ChangeStatus.PENDING_APPROVAL)
        now = timezone.now()
        Approval.objects.create(
            change=change,
            approver=approver,
            approver_name=approver.get_username(),
            decision=ApprovalDecision.REJECTED,
            reason=reason[:2000],
            snapshot=change.snapshot,
            snapshot_digest=change.snapshot.digest,
            params_digest=change.params_digest,
            created_at=now,
            expires_at=now,
        )
        _finish(change, ChangeStatus.REJECTED, reason)
        audit.record(
            action="change.rejected",
            actor=approver,
            target=change,
            host=change.host,
            snapshot=change.snapshot,
            correlation_id=change.correlation_id,
            data={"reason": reason},
        )
    return change


def change_request_break_glass(
    *, change: ChangeRequest, admin: Any, snapshot: StateSnapshot, reason: str
) -> ChangeRequest:
    """The only way past the two-person rule: an admin, a written reason, a red audit event."""
    if not getattr(admin, "is_superuser", False):
        raise ChangeRefused("break-glass needs an administrator", code="forbidden")
    reason = _require_reason(reason, "break-glass", minimum=10)
    return _grant(
        change=change, user=admin, snapshot=snapshot, reason=reason,
        decision=ApprovalDecision.BREAK_GLASS, action="change.break_glass", when="break-glass",
        alert=True,
    )  # fmt: skip


def change_request_cancel(*, change: ChangeRequest, user: Any) -> ChangeRequest:
    """Withdraw a waiting request at once; ask a running job to stop at its next step."""
    is_requester = change.requested_by_id == getattr(user, "pk", None)
    if not (has_role(user, OPERATOR) and (is_requester or has_role(user, APPROVER))):
        raise ChangeRefused(
            "only the requester or an approver who is also an operator can cancel",
            code="forbidden",
        )
    with transaction.atomic():
        locked = ChangeRequest.objects.select_for_update().get(pk=change.pk)
        if locked.status in (ChangeStatus.PENDING_APPROVAL, ChangeStatus.QUEUED):
            _finish(locked, ChangeStatus.CANCELLED, f"cancelled by {user.get_username()}")
            action = "change.cancelled"
        elif locked.status == ChangeStatus.RUNNING:
            locked.cancel_requested = True
            locked.save(update_fields=["cancel_requested"])
            action = "change.cancel_requested"
        else:
            raise ChangeRefused(f"change #{locked.pk} has already finished", code="conflict")
        audit.record(
            action=action,
            actor=user,
            target=locked,
            host=locked.host,
            correlation_id=locked.correlation_id,
        )
    return locked


def _finish(change: ChangeRequest, status: str, reason: str) -> None:
    change.status = status
    change.status_reason = reason[:4000]
    change.finished_at = timezone.now()
    change.save(update_fields=["status", "status_reason", "finished_at"])


def _mark_drifted(
    change: ChangeRequest,
    drift: list[dict[str, Any]],
    *,
    snapshot: StateSnapshot,
    actor: Any,
    when: str,
) -> None:
    change.drift_report = drift
    change.save(update_fields=["drift_report"])
    _finish(
        change,
        ChangeStatus.DRIFTED,
        f"the host changed between the request's snapshot and the {when} snapshot; "
        "request the change again on the current state",
    )
    audit.record(
        action="change.drifted",
        actor=actor,
        target=change,
        host=change.host,
        snapshot=snapshot,
        correlation_id=change.correlation_id,
        data={"when": when, "drift": drift, "decided_on_snapshot": change.snapshot_id},
    )


def approval_valid(change: ChangeRequest, now: dt.datetime | None = None) -> Approval | None:
    """The approval that lets this change run now, if any."""
    now = now or timezone.now()
    return (
        change.approvals.filter(
            decision__in=[ApprovalDecision.APPROVED, ApprovalDecision.BREAK_GLASS],
            voided_at__isnull=True,
            expires_at__gt=now,
            params_digest=change.params_digest,
        )
        .order_by("-created_at")
        .first()
    )


def approvals_void_on_drift(*, snapshots: list[StateSnapshot]) -> int:
    """A later probe that differs materially voids approvals of changes not yet running."""
    latest = {s.host_id: s for s in snapshots if s.status == "ok"}
    if not latest:
        return 0
    approvals = Approval.objects.select_related("change", "snapshot").filter(
        change__host_id__in=list(latest),
        change__status=ChangeStatus.QUEUED,
        voided_at__isnull=True,
        decision__in=[ApprovalDecision.APPROVED, ApprovalDecision.BREAK_GLASS],
    )
    voided = 0
    for approval in approvals:
        snapshot = latest[approval.change.host_id]
        drift = fingerprint_drift(
            approval.snapshot.material_fingerprint(), snapshot.material_fingerprint()
        )
        if not drift:
            continue
        Approval.objects.filter(pk=approval.pk, voided_at__isnull=True).update(
            voided_at=timezone.now(),
            void_reason=f"snapshot #{snapshot.pk} differs materially from what the approver saw",
        )
        change = ChangeRequest.objects.select_for_update().get(pk=approval.change_id)
        if change.status == ChangeStatus.QUEUED:
            _mark_drifted(change, drift, snapshot=snapshot, actor=None, when="later probe")
        voided += 1
    return voided
