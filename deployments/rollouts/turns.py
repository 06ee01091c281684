"""A host's turn in a rollout: probe it now, check it still matches what was approved, and
request its change through the path every change takes (deployments.services), granted under
the rollout's approval. The runner then does what it does for any change: freshness, lease,
drift check, the change, its evaluation.

A turn is claimed first (orchestrator), so one worker takes it; the probe runs outside any
transaction, renewing the claim; the change is made and linked to the host in one transaction
under the rollout's row lock, so a worker killed at any point leaves either no change (the
claim lapses and the turn is taken again, on a new probe) or exactly one.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.accounts.roles import APPROVER, OPERATOR
from controlplane.audit.actions import AuditAction
from hosts import services as host_services
from hosts.choices import ProbeTrigger, SnapshotStatus, Verdict
from hosts.models import Host, HostHealth, StateSnapshot
from hosts.scope import user_has_role_on_host

from .. import kinds, services
from ..choices import ChangeKind, ChangeStatus
from ..models import ChangeRequest, Deployment
from . import lifecycle
from .choices import RolloutHostStatus, RolloutStatus
from .models import Rollout, RolloutApproval, RolloutHost
from .requests import rollout_drain_problem
from .waves import wave_label

logger = logging.getLogger(__name__)
H = RolloutHostStatus


class ClaimLost(Exception):
    """Another worker took the host's turn over (this one's claim lapsed while it probed)."""


def _heartbeat(rollout_host_id: int, token: str) -> Any:
    def renew() -> None:
        kept = RolloutHost.objects.filter(pk=rollout_host_id, claim_token=token).update(
            claimed_at=timezone.now()
        )
        if not kept:
            raise ClaimLost(f"the claim on rollout host {rollout_host_id} was taken over")

    return renew


def _probe(rh: RolloutHost, token: str, *, integrity: bool | None) -> StateSnapshot:
    host = Host.objects.select_related("credential").get(pk=rh.host_id)
    return host_services.host_probe(
        host=host,
        trigger=ProbeTrigger.JOB,
        integrity=integrity,
        heartbeat=_heartbeat(rh.pk, token),
        heartbeat_every=max(1.0, settings.ROLLOUT_CLAIM_SECONDS / 4),
    )


def host_mismatch(
    *,
    rh: RolloutHost,
    snapshot: StateSnapshot,
    verdict: HostHealth | None,
    rollout: Rollout,
    approval: RolloutApproval,
    now: dt.datetime,
) -> str | None:
    """Why the host is no longer what the rollout was approved for, in words; None when it
    still is: reachable and read in full, not in maintenance, serving the same models from the
    same unit file and revision, healthy, and in both people's scope."""
    host = rh.host
    if host.in_maintenance(now):
        until = (
            host.maintenance_until.isoformat(timespec="minutes") if host.maintenance_until else ""
        )
        return f"in maintenance until {until} ({host.maintenance_reason or 'no reason given'})"
    if snapshot.status != SnapshotStatus.OK:
        return f"its probe (snapshot #{snapshot.pk}) is {snapshot.status}: {snapshot.error}".strip()
    dep = snapshot.state().deployments.get(rh.deployment.unit)
    if dep is None:
        return f"snapshot #{snapshot.pk} does not show {rh.deployment.unit}"
    served = sorted(dep.server.models)
    if served != list(rh.approved_models):
        return (
            f"it serves {', '.join(served) or 'nothing'}, not "
            f"{', '.join(rh.approved_models) or 'nothing'} as when the rollout was approved"
        )
    if (dep.unit_file_sha256 or "") != rh.approved_unit_sha256:
        then, found = rh.approved_unit_sha256 or "none", dep.unit_file_sha256 or "none"
        return (
            f"its unit file changed since the rollout was approved (sha256 {then[:12]} then, "
            f"{found[:12]} now)"
        )
    deployment = Deployment.objects.get(pk=rh.deployment_id)
    if deployment.current_revision_id != rh.approved_revision_id:
        return "its deployment is on another revision than when the rollout was approved"
    if verdict is None or verdict.verdict != Verdict.HEALTHY:
        level = verdict.verdict if verdict is not None else Verdict.UNKNOWN
        why = "; ".join(r.get("text", "") for r in (verdict.reasons if verdict else [])[:2])
        return f"its verdict is {level}" + (f": {why}" if why else "")
    requester = rollout.requested_by
    if requester is None or not user_has_role_on_host(requester, OPERATOR, host):
        return f"the requester ({rollout.requested_by_name}) no longer holds the operator role here"
    if approval.approver is None or not user_has_role_on_host(approval.approver, APPROVER, host):
        return f"the approver ({approval.approver_name}) no longer holds the approver role here"
    return None


def _locked_turn(rh_id: int, token: str, status: str) -> tuple[Rollout, RolloutHost | None]:
    """The rollout's row locked, and the host if this claim still holds its turn."""
    rh_row = RolloutHost.objects.only("rollout_id").get(pk=rh_id)
    # Only the rollout's row (`of`): the requester and the model are read, not locked.
    rollout = (
        Rollout.objects.select_for_update(of=("self",))
        .select_related("requested_by", "model", "drain_hook")
        .get(pk=rh_row.rollout_id)
    )
    rh = (
        RolloutHost.objects.select_for_update(of=("self",))
        .select_related("host", "deployment", "change__target_revision")
        .filter(pk=rh_id, claim_token=token, status=status)
        .first()
    )
    if rh is not None:
        rh.rollout = rollout
    return rollout, rh


def _release(rh: RolloutHost, token: str) -> None:
    RolloutHost.objects.filter(pk=rh.pk, claim_token=token).update(claim_token="")


def _request(
    rollout: Rollout,
    approval: RolloutApproval,
    rh: RolloutHost,
    snapshot: StateSnapshot,
    *,
    rollback: bool,
) -> ChangeRequest:
    """The host's change, requested in the requester's name on the fresh snapshot and granted
    under the rollout's approval when it needs one. Each change drains first when the rollout
    does, with the hook it was approved with (or is refused: a rollback then fails, reported,
    rather than run a hook nobody approved). Raises ChangeRefused."""
    problem = rollout_drain_problem(rollout)
    if problem is not None:
        raise services.ChangeRefused(problem, code="conflict")
    hook, deadline = rollout.drain_hook, rollout.drain_deadline_seconds
    if rollback:
        why = (
            f"rollout #{rollout.pk} halted ({rollout.status_reason}): rolling back "
            f"{wave_label(rh.wave)}"
        )
        # Back to exactly what the host served when the rollout was approved, not merely one
        # revision back: the same, unless the unit was rewritten in between.
        change = services.change_request_create(
            user=rollout.requested_by,
            deployment=rh.deployment,
            kind=ChangeKind.ROLLBACK,
            snapshot=snapshot,
            reason=why,
            acknowledge_busy=rollout.acknowledge_busy,
            revision=rh.approved_revision,
            rollout=rollout.pk,
            drain_hook=hook,
            drain_deadline_seconds=deadline,
        )
    else:
        why = f"rollout #{rollout.pk}, {wave_label(rh.wave)}: {rollout.reason}"
        change = services.change_request_create(
            user=rollout.requested_by,
            deployment=rh.deployment,
            kind=rollout.kind,
            snapshot=snapshot,
            reason=why,
            model=rollout.model,
            tensor_parallel_size=rollout.tensor_parallel_size,
            max_model_len=rollout.max_model_len,
            extra_args=rollout.extra_args,
            environment=rollout.environment,
            acknowledge_busy=rollout.acknowledge_busy,
            benchmark_profile=rollout.benchmark_profile if rollout.benchmark else None,
            rollout=rollout.pk,
            drain_hook=hook,
            drain_deadline_seconds=deadline,
        )
    if change.status == ChangeStatus.PENDING_APPROVAL:
        assert approval.approver is not None
        change = services.change_request_approve_for_rollout(
            change=change,
            approver=approval.approver,
            rollout_id=rollout.pk,
            reason=f"rollout #{rollout.pk}, approved by {approval.approver_name}: "
            f"{approval.reason}",
        )
    if change.status != ChangeStatus.QUEUED:
        raise services.ChangeRefused(
            f"change #{change.pk} is {change.get_status_display()}: {change.status_reason}"
        )
    return change


def host_turn(*, rollout_host_id: int, token: str) -> None:
    """Take one host's turn forward: probe, check, request. Skipped and reported if it no
    longer matches what was approved or its change is refused."""
    rh = RolloutHost.objects.select_related("host", "rollout").get(pk=rollout_host_id)
    integrity = True if kinds.spec(rh.rollout.kind).reinstalls_engine else None
    try:
        snapshot = _probe(rh, token, integrity=integrity)
    except ClaimLost:
        return
    host_turn_on(rollout_host_id=rollout_host_id, token=token, snapshot=snapshot)


def host_turn_on(*, rollout_host_id: int, token: str, snapshot: StateSnapshot) -> None:
    """The rest of a host's turn, on the snapshot its probe just took (and the verdict that
    probe left): skip it, or request its change, in one transaction."""
    now = timezone.now()
    verdict = HostHealth.objects.filter(host_id=snapshot.host_id).first()
    with transaction.atomic():
        rollout, rh_locked = _locked_turn(rollout_host_id, token, H.PENDING)
        if rh_locked is None or rh_locked.change_id is not None:
            return
        approval = rollout.approval()
        if rollout.status != RolloutStatus.RUNNING or approval is None:
            _release(rh_locked, token)  # paused or ended meanwhile: not this host's turn now
            return
        why = host_mismatch(
            rh=rh_locked,
            snapshot=snapshot,
            verdict=verdict,
            rollout=rollout,
            approval=approval,
            now=now,
        )
        if why is None:
            try:
                with transaction.atomic():
                    change = _request(rollout, approval, rh_locked, snapshot, rollback=False)
            except services.ChangeRefused as exc:
                why = f"its change was refused: {exc.message}"
            else:
                lifecycle.rollout_host_transition(
                    rollout_host=rh_locked,
                    source=H.PENDING,
                    target=H.RUNNING,
                    fields={"change": change, "claim_token": ""},
                )
                return
        lifecycle.rollout_host_transition(
            rollout_host=rh_locked,
            source=H.PENDING,
            target=H.SKIPPED,
            action=AuditAction.ROLLOUT_HOST_SKIPPED,
            data={"reason": why, "snapshot": snapshot.pk},
            fields={"skip_reason": why, "claim_token": ""},
        )


def rollback_mismatch(*, rh: RolloutHost, snapshot: StateSnapshot, now: dt.datetime) -> str | None:
    """Why a changed host of a halted wave is left as it is rather than rolled back: it is in
    maintenance (someone is working on it), could not be read, or no longer serves the
    revision the rollout gave it (someone changed it since)."""
    host = rh.host
    if host.in_maintenance(now):
        return "it is in maintenance"
    if snapshot.status != SnapshotStatus.OK:
        return f"its probe (snapshot #{snapshot.pk}) is {snapshot.status}"
    deployment = Deployment.objects.get(pk=rh.deployment_id)
    assert rh.change is not None
    if deployment.current_revision_id != rh.change.target_revision_id:
        return "it no longer serves the revision the rollout gave it"
    return None


def rollback_turn(*, rollout_host_id: int, token: str) -> None:
    """Roll one changed host of a halted wave back to the revision it served before."""
    rh = RolloutHost.objects.select_related("host", "rollout").get(pk=rollout_host_id)
    try:
        snapshot = _probe(rh, token, integrity=None)
    except ClaimLost:
        return
    rollback_turn_on(rollout_host_id=rollout_host_id, token=token, snapshot=snapshot)


def rollback_turn_on(*, rollout_host_id: int, token: str, snapshot: StateSnapshot) -> None:
    """The rest of a rollback turn, on the snapshot its probe just took."""
    now = timezone.now()
    with transaction.atomic():
        rollout, rh_locked = _locked_turn(rollout_host_id, token, H.ROLLBACK_PENDING)
        if rh_locked is None or rh_locked.rollback_change_id is not None:
            return
        approval = rollout.approval()
        if rollout.status != RolloutStatus.HALTING or approval is None:
            _release(rh_locked, token)
            return
        why = rollback_mismatch(rh=rh_locked, snapshot=snapshot, now=now)
        if why is None:
            try:
                with transaction.atomic():
                    change = _request(rollout, approval, rh_locked, snapshot, rollback=True)
            except services.ChangeRefused as exc:
                why = f"its rollback was refused: {exc.message}"
            else:
                lifecycle.rollout_host_transition(
                    rollout_host=rh_locked,
                    source=H.ROLLBACK_PENDING,
                    target=H.ROLLING_BACK,
                    fields={"rollback_change": change, "claim_token": ""},
                )
                return
        text = f"not rolled back: {why}"
        lifecycle.rollout_host_transition(
            rollout_host=rh_locked,
            source=H.ROLLBACK_PENDING,
            target=H.ROLLBACK_FAILED,
            action=AuditAction.ROLLOUT_HOST_CHECKED,
            data={"rollback": "not made", "reason": text, "snapshot": snapshot.pk},
            fields={"skip_reason": text, "claim_token": ""},
        )


def turn_taken(*, rollout_host_id: int, token: str, rollback: bool) -> None:
    """Run a claimed turn; an unexpected error skips the host (reported) rather than leaving
    its turn to be taken again and again."""
    try:
        if rollback:
            rollback_turn(rollout_host_id=rollout_host_id, token=token)
        else:
            host_turn(rollout_host_id=rollout_host_id, token=token)
    except Exception as exc:  # keep the rollout moving, with the error on the host's row
        logger.exception("rollout host %s: its turn failed", rollout_host_id)
        text = f"internal error during its turn: {type(exc).__name__}: {exc}"
        rh = RolloutHost.objects.select_related("host", "rollout").get(pk=rollout_host_id)
        source, target = (
            (H.ROLLBACK_PENDING, H.ROLLBACK_FAILED) if rollback else (H.PENDING, H.SKIPPED)
        )
        lifecycle.rollout_host_transition(
            rollout_host=rh,
            source=source,
            target=target,
            action=AuditAction.ROLLOUT_HOST_SKIPPED,
            data={"reason": text},
            fields={"skip_reason": text[:4000], "claim_token": ""},
        )
