"""A second person's decision: approve, reject, or (an administrator) break the glass.

An approval is bound to the request's parameters and to the snapshot the approver saw, which
must be fresh and materially the same as the request's. It stops counting when it expires, or
when a later probe of the host differs materially (Approval.is_valid says which).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from controlplane.accounts.roles import APPROVER
from controlplane.audit.actions import AuditAction
from controlplane.canonical import canonical_digest
from hosts import services as host_services
from hosts.choices import SnapshotStatus
from hosts.models import Host, StateSnapshot
from hosts.state import fingerprint_drift

from .. import lifecycle
from ..choices import ApprovalDecision, ChangeStatus
from ..dispatch import change_execute_on_commit
from ..models import Approval, ChangeRequest
from .locking import lock_in_status
from .refusals import (
    ChangeRefused,
    require_reason,
    require_role,
    stale,
)


def change_params_digest(change: ChangeRequest) -> str:
    """What an approval is bound to: the action, the target and the exact unit file."""
    value = {
        "kind": change.kind,
        "host": change.host_id,
        "deployment": change.deployment_id,
        "from_unit": getattr(change.from_revision, "unit_sha256", None),
        "target_unit": getattr(change.target_revision, "unit_sha256", None),
        "params": change.params,
    }
    return canonical_digest(value)


# Who may decide, asked first without a host (the role anywhere: pages and the API ask it before
# a request's input is even read, so a refusal is a 403 whatever was sent), then on the change's
# host, and again by the decisions below. A change of a host outside the user's scope is not
# found, as if it did not exist.

NO_SUCH_CHANGE = "No such change."


def change_request_approve_allowed(*, user: Any, host: Host | None = None) -> None:
    require_role(user, APPROVER, "Approving a change", host, missing=NO_SUCH_CHANGE)


def change_request_reject_allowed(*, user: Any, host: Host | None = None) -> None:
    require_role(user, APPROVER, "Rejecting a change", host, missing=NO_SUCH_CHANGE)


def change_request_break_glass_allowed(*, user: Any, host: Host | None = None) -> None:
    # An administrator holds every role on every host: the host adds no rule here.
    if not (getattr(user, "is_superuser", False) and getattr(user, "is_active", False)):
        raise ChangeRefused("break-glass needs an administrator", code="forbidden")


def _refuse_own_request(change: ChangeRequest, user: Any) -> None:
    if change.requested_by_id is not None and change.requested_by_id == user.pk:
        raise ChangeRefused(
            "the two-person rule: you cannot approve your own request", code="forbidden"
        )


@dataclass(frozen=True)
class Decisions:
    """What a person may decide on a change waiting for approval, by the rules below: approve
    and reject (an approver of its host who did not request it: a requester cancels), and
    break the glass only when they cannot simply approve: an administrator is a second person
    for every change but their own, so for them break-glass is the way past their own request
    and nothing else. `own_request`: they requested it (the page says why Approve is missing).
    """

    approve: bool = False
    reject: bool = False
    break_glass: bool = False
    own_request: bool = False


def change_request_decisions(*, user: Any, change: ChangeRequest) -> Decisions:
    def allowed(check: Callable[[], None]) -> bool:
        try:
            check()
        except ChangeRefused:
            return False
        return True

    own = change.requested_by_id is not None and change.requested_by_id == user.pk
    approve = not own and allowed(
        lambda: change_request_approve_allowed(user=user, host=change.host)
    )
    return Decisions(
        approve=approve,
        # Their own request they withdraw (Cancel), rather than reject as if a second person.
        reject=not own
        and allowed(lambda: change_request_reject_allowed(user=user, host=change.host)),
        break_glass=not approve
        and allowed(lambda: change_request_break_glass_allowed(user=user, host=change.host)),
        own_request=own,
    )


def change_request_approve(
    *, change: ChangeRequest, approver: Any, snapshot: StateSnapshot, reason: str
) -> ChangeRequest:
    """Approve on the snapshot the approver saw; it must be fresh and materially the same."""
    change_request_approve_allowed(user=approver, host=change.host)
    _refuse_own_request(change, approver)
    reason = require_reason(reason, "an approval")
    return _grant(
        change=change,
        user=approver,
        snapshot=snapshot,
        reason=reason,
        decision=ApprovalDecision.APPROVED,
        action=AuditAction.CHANGE_APPROVED,
        when="approval",
    )


def change_request_break_glass(
    *, change: ChangeRequest, admin: Any, snapshot: StateSnapshot, reason: str
) -> ChangeRequest:
    """The only way past the two-person rule: an admin, a written reason, a red audit event."""
    change_request_break_glass_allowed(user=admin, host=change.host)
    reason = require_reason(reason, "break-glass", minimum=10)
    return _grant(
        change=change,
        user=admin,
        snapshot=snapshot,
        reason=reason,
        decision=ApprovalDecision.BREAK_GLASS,
        action=AuditAction.CHANGE_BREAK_GLASS,
        when="break-glass",
        alert=True,
    )


def change_request_approve_for_rollout(
    *, change: ChangeRequest, approver: Any, reason: str, rollout_id: int
) -> ChangeRequest:
    """A change a rollout requested on one host, granted under the rollout's one approval
    (deployments.rollouts): its approver decided on the rollout's parameters and on what this
    host served. The grant is recorded on the host's own change as any approval is, bound to
    its parameters and to the fresh snapshot it rests on, so the runner's checks (freshness,
    the approval's expiry, drift) treat it like any other."""
    change_request_approve_allowed(user=approver)
    _refuse_own_request(change, approver)
    if (change.params or {}).get("rollout") != rollout_id:
        raise ChangeRefused(f"change #{change.pk} is not part of rollout #{rollout_id}")
    reason = require_reason(reason, "an approval")
    return _grant(
        change=change,
        user=approver,
        snapshot=change.snapshot,
        reason=reason,
        decision=ApprovalDecision.APPROVED,
        action=AuditAction.CHANGE_APPROVED,
        when="rollout's approval",
        extra={"rollout": rollout_id},
    )


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
    extra: dict[str, Any] | None = None,
) -> ChangeRequest:
    """Record an approval bound to the request's parameters and the snapshot `user` saw, and
    queue the job; or mark the request drifted if that snapshot differs materially."""
    with transaction.atomic():
        change = lock_in_status(change, ChangeStatus.PENDING_APPROVAL)
        if change.params_digest != change_params_digest(change):
            raise ChangeRefused(
                "the request's parameters changed after it was made", code="conflict"
            )
        try:
            age = host_services.snapshot_require_fresh(
                snapshot=snapshot, host=change.host, allow_partial=change.rests_on_partial
            )
        except host_services.SnapshotNotUsable as exc:
            raise stale(exc) from exc
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
            reason=reason,
            snapshot=snapshot,
            snapshot_digest=snapshot.digest,
            params_digest=change.params_digest,
            created_at=now,
            expires_at=now + dt.timedelta(seconds=settings.APPROVAL_TTL_SECONDS),
        )
        data: dict[str, Any] = {
            "reason": reason,
            "snapshot_age_seconds": round(age, 3),
            "params_digest": change.params_digest,
            "expires_in_seconds": settings.APPROVAL_TTL_SECONDS,
        }
        if alert:
            data["alert"] = True
        data.update(extra or {})
        try:
            lifecycle.change_transition(
                change=change,
                source=ChangeStatus.PENDING_APPROVAL,
                target=ChangeStatus.QUEUED,
                action=action,
                actor=user,
                snapshot=snapshot,
                data=data,
            )
        except IntegrityError as exc:
            raise ChangeRefused(
                f"another job is queued or running on {change.host.name}; approve again once "
                "it has finished",
                code="conflict",
            ) from exc
        change_execute_on_commit(change.pk)
    return change


def change_request_reject(*, change: ChangeRequest, approver: Any, reason: str) -> ChangeRequest:
    change_request_reject_allowed(user=approver, host=change.host)
    reason = require_reason(reason, "a rejection")
    with transaction.atomic():
        change = lock_in_status(change, ChangeStatus.PENDING_APPROVAL)
        now = timezone.now()
        Approval.objects.create(
            change=change,
            approver=approver,
            approver_name=approver.get_username(),
            decision=ApprovalDecision.REJECTED,
            reason=reason,
            snapshot=change.snapshot,
            snapshot_digest=change.snapshot.digest,
            params_digest=change.params_digest,
            created_at=now,
            expires_at=None,
        )
        lifecycle.change_transition(
            change=change,
            source=ChangeStatus.PENDING_APPROVAL,
            target=ChangeStatus.REJECTED,
            reason=reason,
            action=AuditAction.CHANGE_REJECTED,
            actor=approver,
            snapshot=change.snapshot,
            data={"reason": reason},
        )
    return change


def _mark_drifted(
    change: ChangeRequest,
    drift: list[dict[str, Any]],
    *,
    snapshot: StateSnapshot,
    actor: Any,
    when: str,
) -> None:
    lifecycle.change_transition(
        change=change,
        source=[ChangeStatus.PENDING_APPROVAL, ChangeStatus.QUEUED],
        target=ChangeStatus.DRIFTED,
        reason=f"the host changed between the request's snapshot and the {when} snapshot; "
        "request the change again on the current state",
        action=AuditAction.CHANGE_DRIFTED,
        actor=actor,
        snapshot=snapshot,
        data={"when": when, "drift": drift, "decided_on_snapshot": change.snapshot_id},
        fields={"drift_report": drift},
    )


def approvals_void_on_drift(*, snapshots: list[StateSnapshot]) -> int:
    """A later probe that differs materially voids approvals of changes not yet running."""
    latest = {s.host_id: s for s in snapshots if s.status == SnapshotStatus.OK}
    if not latest:
        return 0
    approvals = (
        Approval.objects.grants()
        .select_related("change", "snapshot")
        .filter(
            change__host_id__in=list(latest),
            change__status=ChangeStatus.QUEUED,
            voided_at__isnull=True,
        )
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
        change = ChangeRequest.objects.select_related("host").get(pk=approval.change_id)
        if change.status == ChangeStatus.QUEUED:
            _mark_drifted(change, drift, snapshot=snapshot, actor=None, when="later probe")
        voided += 1
    return voided
