"""Requesting a change, and withdrawing it."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from controlplane.accounts.roles import APPROVER, OPERATOR
from controlplane.audit import context as audit_context
from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from hosts import services as host_services
from hosts.models import Host, StateSnapshot
from hosts.scope import user_has_role_on_host

from .. import engine_repair, kinds, lifecycle, policy, revisions
from ..choices import OPEN_STATUSES, ChangeStatus
from ..dispatch import change_execute_on_commit
from ..models import (
    BenchmarkProfile,
    ChangeRequest,
    Deployment,
    DeploymentRevision,
    DrainHook,
    ModelArtifact,
)
from .approvals import change_params_digest
from .drain_requests import drain_params
from .preflight import (
    Preflight,
    change_preflight,
    change_target_for,
    unknown_facts_to_acknowledge,
)
from .refusals import ChangeRefused, require_reason, require_role, shown_in, stale


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
    environment: dict[str, str] | None = None,
    revision: DeploymentRevision | None = None,
    acknowledge_busy: bool = False,
    acknowledge_unknown: bool = False,
    acknowledge_integrity: bool = False,
    benchmark: bool = False,
    benchmark_profile: BenchmarkProfile | None = None,
    drain_hook: DrainHook | None = None,
    drain_deadline_seconds: int | None = None,
    rollout: int | None = None,
) -> ChangeRequest:
    # One function, long for its keyword parameters: the one place a change is requested.
    """Record a request on `snapshot`: queued at once, or waiting for a second person when the
    kind, or what it would change in what serves, needs one (deployments.policy).

    A stop or restart may rest on a partial snapshot if `acknowledge_unknown` says the requester
    read what is unknown; the list is kept on the request and in the audit log. A new revision
    on an engine whose integrity check is not clean needs `acknowledge_integrity`. The serving
    benchmark runs with `benchmark_profile` (or the default profile when only `benchmark` is
    set), before and after the change. A rollback goes back to `revision`, any revision the
    deployment served but the current one, or by default to the one before the current one;
    it needs the approval its content needs (deployments.policy compares the units).
    With a `drain_hook` the job drains the host first and
    waits up to `drain_deadline_seconds` for the requests in flight (deployments.execution.
    drain); `acknowledge_busy` then lets it go ahead if some are still running at the deadline.
    `rollout` names the rollout (deployments.rollouts) the
    change is one host's turn of: kept in its parameters, so the approval binds to it too.
    """
    change_request_create_allowed(user=user, host=deployment.host)
    if kind not in kinds.KINDS:
        raise ChangeRefused(f"unknown change kind {kind!r}")
    reason = require_reason(reason, "a change request")
    shaped = {"tensor_parallel_size": tensor_parallel_size, "max_model_len": max_model_len,
              "extra_args": extra_args, "environment": environment}  # fmt: skip
    wrong = kinds.request_field_errors(
        kind, model=model is not None, shaped=[k for k, v in shaped.items() if v is not None],
        benchmark=benchmark or benchmark_profile is not None, revision=revision is not None,
        drain=drain_hook is not None,
    )  # fmt: skip
    if wrong:
        raise ChangeRefused(" ".join(wrong.values()), fields=wrong)
    drain = drain_params(drain_hook, drain_deadline_seconds)
    profile = _benchmark_profile(benchmark_profile, benchmark)
    if kinds.spec(kind).takes_model and model is not None and model.pk == deployment.model_id:
        raise ChangeRefused("a model swap needs a different model from the catalog")
    unknown = _unknown_facts_acknowledged(kind, snapshot, acknowledge_unknown)
    try:
        age = host_services.snapshot_require_fresh(
            snapshot=snapshot, host=deployment.host, allow_partial=unknown is not None
        )
    except host_services.SnapshotNotUsable as exc:
        raise stale(exc) from exc
    with transaction.atomic():
        deployment = (
            Deployment.objects.select_for_update()
            .select_related("host", "model")
            .get(pk=deployment.pk)
        )
        _refuse_a_second_open_request(deployment)
        with shown_in("target"):
            target = change_target_for(
                deployment=deployment, kind=kind, model=model,
                tensor_parallel_size=tensor_parallel_size, max_model_len=max_model_len,
                extra_args=extra_args, environment=environment, snapshot=snapshot,
                revision=revision,
            )  # fmt: skip
        checks = change_preflight(
            deployment=deployment, target=target, snapshot=snapshot, drains=drain is not None
        )
        with shown_in("preflight"):
            _refuse_on_preflight(checks, acknowledge_busy, acknowledge_integrity)
        because = policy.approval_reasons(target=target)
        params = _params(deployment, kind, checks, because, profile, unknown)
        if drain is not None:
            params["drain"] = drain
        # Draining, the acknowledgement is for the deadline: whatever is in flight then.
        busy = acknowledge_busy if drain is not None else checks.busy
        if rollout is not None:
            params["rollout"] = rollout
        change = _store(
            user=user, deployment=deployment, target=target, snapshot=snapshot, reason=reason,
            because=because, busy=busy, params=params,
        )  # fmt: skip
        _record_requested(change, user=user, target=target, checks=checks, age=age)
        if change.status == ChangeStatus.QUEUED:
            change_execute_on_commit(change.pk)
    return change


def change_request_create_allowed(*, user: Any, host: Host | None = None) -> None:
    """An operator of `host` (without a host: anywhere, the first gate); a deployment of a host
    outside the user's scope is not found."""
    require_role(user, OPERATOR, "Requesting a change", host, missing="No such deployment.")


def _refuse_a_second_open_request(deployment: Deployment) -> None:
    """One open request per deployment: a second swap waiting beside the first would leave
    the approver choosing between competing futures, each rewritten from the same revision.
    The caller holds the deployment's row lock, so two requests cannot both pass."""
    open_change = (
        ChangeRequest.objects.filter(deployment=deployment, status__in=OPEN_STATUSES)
        .order_by("pk")
        .first()
    )
    if open_change is not None:
        raise ChangeRefused(
            f"change #{open_change.pk} is {open_change.get_status_display()} on "
            f"{deployment.host.name} ({open_change.get_kind_display()} of {deployment.unit}): "
            "one open request per deployment; let it finish, or cancel it, before requesting "
            "another",
            code="conflict",
            open_change=open_change.pk,
        )


def _unknown_facts_acknowledged(
    kind: str, snapshot: StateSnapshot, acknowledge_unknown: bool
) -> list[str] | None:
    """The unknown facts a stop or restart on a partial snapshot goes ahead with, or None when
    the snapshot is not partial (or the kind may not rest on one: freshness refuses it)."""
    facts = unknown_facts_to_acknowledge(kind, snapshot)
    if facts is None:
        return None
    if not acknowledge_unknown:
        raise ChangeRefused(
            f"snapshot #{snapshot.pk} is partial; unknown: {'; '.join(facts)}. Acknowledge what "
            "is unknown explicitly to go ahead with this stop or restart.",
            code="conflict",
            needs_unknown_acknowledgement=True,
            unknown=facts,
        )
    return facts


def _benchmark_profile(
    profile: BenchmarkProfile | None, benchmark: bool
) -> BenchmarkProfile | None:
    """The profile asked for, or the default one when only `benchmark` is set (the kind's
    rules, kinds.request_field_errors, allowed a benchmark already)."""
    if profile is None and benchmark:
        profile = BenchmarkProfile.objects.filter(is_default=True).first()
        if profile is None:
            raise ChangeRefused("no benchmark profile is marked default: pick one")
    return profile


def _refuse_on_preflight(
    checks: Preflight, acknowledge_busy: bool, acknowledge_integrity: bool
) -> None:
    """Problems refuse; what needs an acknowledgement refuses until it is given, saying which
    (`needs_acknowledgement`: requests in flight, `needs_integrity_acknowledgement`)."""
    if checks.problems:
        raise ChangeRefused("; ".join(checks.problems), code="conflict")
    missing: list[str] = []
    details: dict[str, bool] = {}
    if checks.needs_busy_acknowledgement and not acknowledge_busy:
        missing.append(f"the server has {checks.inflight:.0f} requests in flight")
        details["needs_acknowledgement"] = True
    if checks.needs_integrity_acknowledgement and not acknowledge_integrity:
        assert checks.integrity is not None
        missing.append(f"the engine integrity check is not clean: {checks.integrity.describe()}")
        details["needs_integrity_acknowledgement"] = True
    if missing:
        raise ChangeRefused(
            "; ".join(missing) + ". Acknowledge this explicitly to go ahead.",
            code="conflict",
            **details,
        )


def _params(
    deployment: Deployment,
    kind: str,
    checks: Preflight,
    because: list[str],
    profile: BenchmarkProfile | None,
    unknown: list[str] | None,
) -> dict[str, Any]:
    """What the change carries beyond its revisions; approvals bind to all of it."""
    params: dict[str, Any] = {
        "benchmark": profile.definition() if profile is not None else False,
        "approval_because": because,
    }
    if unknown is not None:
        params["acknowledged_unknown"] = unknown
    found = checks.integrity
    if found is None:
        return params
    if checks.integrity_unclean:
        params["integrity_acknowledged"] = {
            "snapshot": found.snapshot.pk,
            "found": found.describe(),
        }
    if kinds.spec(kind).reinstalls_engine:  # pre-flight made sure this check may back it
        params["engine_package"] = {
            **engine_repair.package_of(found.report, deployment.engine_package_source),
            "integrity_snapshot": found.snapshot.pk,
        }
    return params


def _store(
    *,
    user: Any,
    deployment: Deployment,
    target: revisions.ChangeTarget,
    snapshot: StateSnapshot,
    reason: str,
    because: list[str],
    busy: bool,
    params: dict[str, Any],
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
        params=params,
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
    if target.content is not None:  # numbered once it is written (plan.write_revision)
        change.target_revision = revisions.revision_create(
            deployment=deployment,
            content=target.content,
            number=None,
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
            "benchmark": (change.params.get("benchmark") or {}).get("name"),
            "engine_package": change.params.get("engine_package"),
            "drain": change.params.get("drain"),
            **({"rollout": change.params["rollout"]} if "rollout" in change.params else {}),
        },
    )
    _record_acknowledged(change, user=user, checks=checks)


def _record_acknowledged(change: ChangeRequest, *, user: Any, checks: Preflight) -> None:
    """One event for each thing the requester acknowledged to go ahead."""
    params = change.params
    acknowledged: list[tuple[AuditAction, dict[str, Any]]] = []
    if "acknowledged_unknown" in params:
        acknowledged.append(
            (AuditAction.CHANGE_UNKNOWN_ACKNOWLEDGED, {"unknown": params["acknowledged_unknown"]})
        )
    if "integrity_acknowledged" in params:
        acknowledged.append(
            (AuditAction.CHANGE_INTEGRITY_ACKNOWLEDGED, params["integrity_acknowledged"])
        )
    if change.busy_acknowledged:
        data: dict[str, Any] = {"inflight": checks.inflight, "warning": checks.warnings}
        if "drain" in params:  # what is still in flight when the drain's deadline passes
            data["at_drain_deadline"] = params["drain"]["deadline_seconds"]
        acknowledged.append((AuditAction.CHANGE_BUSY_ACKNOWLEDGED, data))
    for action, data in acknowledged:
        audit.record(
            action=action,
            actor=user,
            target=change,
            host=change.host,
            snapshot=change.snapshot,
            correlation_id=change.correlation_id,
            data=data,
        )


def change_request_cancel_allowed(*, change: ChangeRequest, user: Any) -> None:
    """Who may cancel this change: its requester, or an approver, who must be an operator, each
    role held on the change's host; a change of a host outside the user's scope is not found."""
    require_role(user, OPERATOR, "Cancelling a change", change.host, missing="No such change.")
    is_requester = change.requested_by_id == getattr(user, "pk", None)
    if not (is_requester or user_has_role_on_host(user, APPROVER, change.host)):
        raise ChangeRefused(
            "only the requester or an approver who is also an operator can cancel",
            code="forbidden",
        )


def change_request_cancel(*, change: ChangeRequest, user: Any) -> ChangeRequest:
    """Withdraw a waiting request at once; ask a running job to stop at its next step."""
    change_request_cancel_allowed(change=change, user=user)
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
