"""Requesting a change, and withdrawing it."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from controlplane.accounts.roles import APPROVER, OPERATOR, has_role
from controlplane.audit import context as audit_context
from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from hosts import services as host_services
from hosts.models import StateSnapshot

from .. import lifecycle, policy, revisions
from ..choices import ChangeKind, ChangeStatus
from ..models import ChangeRequest, Deployment, ModelArtifact
from .approvals import change_params_digest
from .preflight import Preflight, change_preflight, change_target_for
from .refusals import ChangeRefused, enqueue_on_commit, require_reason, require_role, stale


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
    """Record a request on `snapshot`: queued at once, or waiting for a second person when the
    kind, or what it would change in what serves, needs one (deployments.policy)."""
    require_role(user, OPERATOR, "Requesting a change")
    if kind not in ChangeKind.values:
        raise ChangeRefused(f"unknown change kind {kind!r}")
    reason = require_reason(reason, "a change request")
    if kind == ChangeKind.MODEL_SWAP and (model is None or model.pk == deployment.model_id):
        raise ChangeRefused("a model swap needs a different model from the catalog")
    try:
        age = host_services.snapshot_require_fresh(snapshot=snapshot, host=deployment.host)
    except host_services.SnapshotNotUsable as exc:
        raise stale(exc) from exc
    with transaction.atomic():
        deployment = (
            Deployment.objects.select_for_update()
            .select_related("host", "model")
            .get(pk=deployment.pk)
        )
        target = change_target_for(
            deployment=deployment, kind=kind, model=model,
            tensor_parallel_size=tensor_parallel_size, max_model_len=max_model_len,
            extra_args=extra_args,
        )  # fmt: skip
        checks = change_preflight(deployment=deployment, target=target, snapshot=snapshot)
        _refuse_on_preflight(checks, acknowledge_busy)
        because = policy.approval_reasons(
            kind=kind,
            current_unit_text=target.current.unit_text,
            target_unit_text=target.unit_text if target.writes_unit else None,
        )
        change = _store(
            user=user, deployment=deployment, target=target, snapshot=snapshot, reason=reason,
            because=because, busy=checks.busy, benchmark=benchmark,
        )  # fmt: skip
        _record_requested(change, user=user, target=target, checks=checks, age=age)
        if change.status == ChangeStatus.QUEUED:
            enqueue_on_commit(change)
    return change


def _refuse_on_preflight(checks: Preflight, acknowledge_busy: bool) -> None:
    if checks.problems:
        raise ChangeRefused("; ".join(checks.problems), code="conflict")
    if checks.busy and not acknowledge_busy:
        raise ChangeRefused(
            "; ".join(checks.warnings) + ". Acknowledge this explicitly to go ahead.",
            code="conflict",
            needs_acknowledgement=True,
        )


def _store(
    *,
    user: Any,
    deployment: Deployment,
    target: revisions.ChangeTarget,
    snapshot: StateSnapshot,
    reason: str,
    because: list[str],
    busy: bool,
    benchmark: bool,
) -> ChangeRequest:
    """The change row, its new target revision (if it writes one) and the digest approvals
    bind to."""
    change = ChangeRequest(
        host=deployment.host,
        deployment=deployment,
        kind=target.kind,
        snapshot=snapshot,
        from_revision=target.current,
        target_revision=target.revision,
        reason=reason,
        requested_by=user,
        requested_by_name=user.get_username(),
        needs_approval=bool(because),
        busy_acknowledged=busy,
        params={"benchmark": bool(benchmark), "approval_because": because},
        params_digest="",
        status=lifecycle.initial_status(needs_approval=bool(because)),
        correlation_id=audit_context.current().correlation_id or audit_context.new_correlation_id(),
    )
    try:
        with transaction.atomic():
            change.save()
    except IntegrityError as exc:
        raise ChangeRefused(
            f"another job is queued or running on {deployment.host.name}", code="conflict"
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
    return change


def _record_requested(
    change: ChangeRequest,
    *,
    user: Any,
    target: revisions.ChangeTarget,
    checks: Preflight,
    age: float,
) -> None:
    audit.record(
        action=AuditAction.CHANGE_REQUESTED,
        actor=user,
        target=change,
        host=change.host,
        snapshot=change.snapshot,
        correlation_id=change.correlation_id,
        data={
            "kind": change.kind,
            "deployment": change.deployment.unit,
            "reason": change.reason,
            "from_revision": target.current.number,
            "target_revision": getattr(change.target_revision, "number", None),
            "target_model": str(target.model),
            "needs_approval": change.needs_approval,
            "approval_because": change.params["approval_because"],
            "snapshot_age_seconds": round(age, 3),
            "fit": getattr(checks.fit, "message", None),
            "inflight": checks.inflight,
        },
    )
    if checks.busy:
        audit.record(
            action=AuditAction.CHANGE_BUSY_ACKNOWLEDGED,
            actor=user,
            target=change,
            host=change.host,
            snapshot=change.snapshot,
            correlation_id=change.correlation_id,
            data={"inflight": checks.inflight, "warning": checks.warnings},
        )


def change_request_cancel(*, change: ChangeRequest, user: Any) -> ChangeRequest:
    """Withdraw a waiting request at once; ask a running job to stop at its next step."""
    is_requester = change.requested_by_id == getattr(user, "pk", None)
    if not (has_role(user, OPERATOR) and (is_requester or has_role(user, APPROVER))):
        raise ChangeRefused(
            "only the requester or an approver who is also an operator can cancel",
            code="forbidden",
        )
    with transaction.atomic():
        locked = ChangeRequest.objects.select_for_update().select_related("host").get(pk=change.pk)
        if locked.status in (ChangeStatus.PENDING_APPROVAL, ChangeStatus.QUEUED):
            lifecycle.change_transition(
                change=locked, source=locked.status, target=ChangeStatus.CANCELLED,
                reason=f"cancelled by {user.get_username()}", action=AuditAction.CHANGE_CANCELLED,
                actor=user,
            )  # fmt: skip
        elif locked.status == ChangeStatus.RUNNING:
            ChangeRequest.objects.filter(pk=locked.pk).update(cancel_requested=True)
            locked.cancel_requested = True
            audit.record(
                action=AuditAction.CHANGE_CANCEL_REQUESTED,
                actor=user,
                target=locked,
                host=locked.host,
                correlation_id=locked.correlation_id,
            )
        else:
            raise ChangeRefused(f"change #{locked.pk} has already finished", code="conflict")
    return locked
