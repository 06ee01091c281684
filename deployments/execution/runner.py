"""Executing a change request as logged steps, under a fenced host lease.

Lifecycle: queued -> running -> succeeded | failed | rolled_back | drifted | cancelled |
interrupted (deployments.lifecycle). A job never ends `running`: if its worker dies, its
heartbeat stops and recover_interrupted() marks it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Max
from django.db.models.functions import Coalesce
from django.utils import timezone

from controlplane.audit import context as audit_context
from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from controlplane.clock import SYSTEM_CLOCK, Clock
from hosts import commands
from hosts import services as host_services
from hosts.choices import SnapshotStatus
from hosts.models import StateSnapshot
from hosts.ssh import SSHFailure

from .. import kinds, lifecycle, services
from ..choices import ApprovalLapse, ChangeStatus
from ..models import ChangeRequest, Deployment
from . import drain, plan, verification
from . import lease as leases
from .drift import execution_drift
from .job import Job
from .lease import LeaseLost
from .outcomes import JobEnded, VerificationFailed
from .steps import steps_close_unfinished

__all__ = ["Job", "LeaseLost", "change_execute", "queued_too_long", "recover_interrupted"]


def run(job: Job) -> None:
    """Check that the decision still holds, take the host, re-check the host itself, evaluate
    what serves now, drain it if the request asked to, then act; a failed verification is kept
    in a snapshot, and a new revision that fails it restores the previous one. A drained host
    is put back whatever became of the change."""
    basis = _check_decision(job)
    with job.step("take the host lease"):
        job.take_lease()
    before = _check_host(job, basis)
    verification.baseline(job, before)
    drained = drain.take_out(job)
    try:
        if drained is not None:
            drain.wait_for_idle(job, drained)
        _act(job)
    finally:
        if drained is not None:
            drain.put_back(job, drained)


def _act(job: Job) -> None:
    try:
        plan.apply(job)
    except VerificationFailed as failure:
        writes = kinds.spec(job.change.kind).writes_revision
        restoring = writes and job.change.from_revision is not None
        verification.snapshot_on_failure(job, final=not restoring)
        if restoring:
            plan.restore(job, str(failure))
        raise JobEnded(ChangeStatus.FAILED, str(failure)) from failure


def _check_decision(job: Job) -> StateSnapshot:
    """The snapshot the decision rests on, still fresh, with a valid approval if one is needed.

    An approval rests on the approver's own snapshot, checked to be materially the same as the
    request's; that newer one is what must still be fresh now.
    """
    change = job.change
    now = job.clock.now()
    approval = change.valid_approval(now) if change.needs_approval else None
    basis = approval.snapshot if approval is not None else change.snapshot
    job.journal.rest_on(basis)
    with job.step("check the snapshot is still fresh") as step:
        try:
            age = host_services.snapshot_require_fresh(
                snapshot=basis, host=job.host, allow_partial=change.rests_on_partial
            )
        except host_services.SnapshotNotUsable as exc:
            raise JobEnded(ChangeStatus.FAILED, f"refused at execution start: {exc}") from exc
        whose = f"the approver's ({approval.approver_name})" if approval else "the request's"
        step.output = (
            f"snapshot #{basis.pk}, {whose}, is {age:.1f} s old; the limit is "
            f"{settings.SNAPSHOT_MAX_AGE_SECONDS} s"
        )
    if change.needs_approval:
        with job.step("check the approval"):
            if change.params_digest != services.change_params_digest(change):
                raise JobEnded(ChangeStatus.FAILED, "the parameters changed after approval")
            if approval is None:
                reason, detail = _approval_lapse(change, now)
                raise JobEnded(ChangeStatus.FAILED, reason, detail={"approval": detail})
    return basis


def _approval_lapse(change: ChangeRequest, now: dt.datetime) -> tuple[str, dict[str, object]]:
    """Why no approval lets `change` run at `now`, in words and for the audit event: the last
    one given expired, or it was voided (and why)."""
    grant = change.latest_grant()
    if grant is None:
        return "no valid approval: none was given", {"lapse": None}
    lapse = grant.lapse(now)
    detail: dict[str, object] = {
        "id": grant.pk,
        "lapse": lapse.value if lapse else None,
        "approver": grant.approver_name,
        "expires_at": grant.expires_at.isoformat() if grant.expires_at else None,
        "voided_at": grant.voided_at.isoformat() if grant.voided_at else None,
    }
    by = f"the approval by {grant.approver_name}"
    if lapse == ApprovalLapse.VOIDED:
        why = grant.void_reason or "it was given for other parameters than the change's"
        detail["void_reason"] = why
        return f"no valid approval: {by} was voided: {why}", detail
    if lapse == ApprovalLapse.EXPIRED and grant.expires_at is not None:
        ttl = round((grant.expires_at - grant.created_at).total_seconds())
        when = grant.expires_at.isoformat(timespec="seconds")
        return f"no valid approval: {by} expired at {when}, {ttl} s after it was given", detail
    return f"no valid approval: {by} no longer counts", detail


def _check_host(job: Job, basis: StateSnapshot) -> StateSnapshot:
    """Probe again right before the first destructive command; any drift ends the job. An
    engine repair checks the engine's files again too: it reinstalls what that check finds."""
    change = job.change
    with job.step("re-probe and compare with the decided snapshot") as step:
        before = job.shell.probe(
            integrity=True if kinds.spec(change.kind).reinstalls_engine else None
        )
        ChangeRequest.objects.filter(pk=change.pk).update(before_snapshot=before)
        change.before_snapshot = before
        usable = {SnapshotStatus.OK} | (
            {SnapshotStatus.PARTIAL} if change.rests_on_partial else set()
        )
        if before.status not in usable:
            raise JobEnded(
                ChangeStatus.FAILED, f"could not re-probe the host: {before.status} {before.error}"
            )
        drift = execution_drift(change=change, basis=basis, current=before)
        if drift:
            step.output = json.dumps(drift, indent=1)
            ChangeRequest.objects.filter(pk=change.pk).update(drift_report=drift)
            change.drift_report = drift
            raise JobEnded(ChangeStatus.DRIFTED, "the host drifted since the decision")
        step.output = (
            f"snapshot #{before.pk} ({before.status}): nothing material differs from snapshot "
            f"#{basis.pk}"
        )
    return before


def _apply_revision_to_deployment(change: ChangeRequest) -> None:
    revision = change.target_revision
    if not kinds.spec(change.kind).writes_revision or revision is None:
        return
    deployment = Deployment.objects.select_for_update().get(pk=change.deployment_id)
    deployment.current_revision = revision
    deployment.model = revision.model
    deployment.tensor_parallel_size = revision.tensor_parallel_size
    deployment.max_model_len = revision.max_model_len
    deployment.extra_args = revision.extra_args
    deployment.environment = revision.environment
    deployment.drain_grace_seconds = revision.drain_grace_seconds
    deployment.save(
        update_fields=[
            "current_revision",
            "model",
            "tensor_parallel_size",
            "max_model_len",
            "extra_args",
            "environment",
            "drain_grace_seconds",
        ]
    )


def _end(job: Job, status: str, reason: str, detail: dict[str, object] | None = None) -> bool:
    """Record the outcome if the job still owns the row (a recovery may have ended it). A
    success makes its revision the deployment's current one in the same transaction, and the
    host's lease is freed in it too: no one sees the job ended while its host is still held."""
    change = job.change
    change.refresh_from_db(fields=["before_snapshot", "after_snapshot", "drift_report"])
    reason += drain.outcome_note(job)
    with transaction.atomic():
        # The host's row before the audit chain's lock (audit.chain_lock): the verdict decided
        # at the end writes it.
        host_services.hosts_rows_lock([change.host_id])
        running = ChangeRequest.objects.select_for_update().filter(
            pk=change.pk, status=ChangeStatus.RUNNING
        )
        if not running.exists():
            return False
        if status == ChangeStatus.SUCCEEDED:
            _apply_revision_to_deployment(change)
        # A step whose own record failed (the database went away as it was written) is closed
        # here, and what it sent is named in this event.
        unfinished = steps_close_unfinished(
            change=change, why="the job ended before this step was recorded", now=timezone.now()
        )
        ended = lifecycle.change_transition(
            change=change,
            source=ChangeStatus.RUNNING,
            target=status,
            reason=reason,
            action=AuditAction.change_ended(status),
            snapshot=change.snapshot,
            data={
                "reason": reason,
                "drift": change.drift_report or None,
                "before_snapshot": change.before_snapshot_id,
                "after_snapshot": change.after_snapshot_id,
                **({"unfinished_steps": unfinished} if unfinished else {}),
                **({"drain": job.drain_report} if job.drain_report else {}),
                **(detail or {}),
            },
        )
        if ended:
            job.release_lease()
        # The host's verdict weighs the last change's outcome: decide it again now.
        services.host_health_update(host=change.host, ended_change=change.pk)
        return ended


def _snapshot_of_lost_host(job: Job) -> None:
    """The host stopped answering mid-job: what a probe finds now (unreachable, timing out)
    becomes the job's last snapshot, so the host's page and its verdict say so as the job
    ends, not at the next scheduled probe. Best effort: the job ends failed either way."""
    with contextlib.suppress(JobEnded, LeaseLost, SSHFailure):
        verification.snapshot_on_failure(job, final=True)


def change_execute(*, change_id: int, clock: Clock = SYSTEM_CLOCK) -> ChangeRequest | None:
    """Run one queued change. Safe to call twice: only the caller that claims it runs it."""
    claimable = ChangeRequest.objects.select_related(
        "host", "deployment", "snapshot", "from_revision__model", "target_revision__model"
    )
    change = claimable.filter(pk=change_id).first()
    if change is None or not lifecycle.change_transition(
        change=change, source=ChangeStatus.QUEUED, target=ChangeStatus.RUNNING, now=clock.now()
    ):
        return None
    job = Job(change, clock)
    with audit_context.acting(correlation_id=change.correlation_id):
        audit.record(
            action=AuditAction.CHANGE_STARTED,
            target=change,
            host=change.host,
            snapshot=change.snapshot,
            correlation_id=change.correlation_id,
        )
        try:
            run(job)
            note = verification.baseline_note(job)
            _end(job, ChangeStatus.SUCCEEDED, f"verified healthy and coherent{note}")
        except JobEnded as ended:
            reason = f"{ended.reason}{verification.baseline_note(job)}"
            _end(job, ended.status, reason, ended.detail)
        except LeaseLost as lost:
            _end(job, ChangeStatus.INTERRUPTED, str(lost))
        except SSHFailure as failure:
            _snapshot_of_lost_host(job)
            _end(job, ChangeStatus.FAILED, f"SSH: {failure.message}")
        except commands.UnsafeCommand as refused:  # a row that bypassed validation
            _end(job, ChangeStatus.FAILED, f"nothing sent: {refused}")
        except (OperationalError, InterfaceError) as lost:
            # The database went away mid-job (a restart, dropped connections): what the job was
            # writing, a step's end and its audit event, is lost with its transaction, so the
            # job goes no further. Said on a new connection if the database answers again; if
            # not, this raises too and recovery ends the job once its lease lapses.
            connection.close_if_unusable_or_obsolete()
            why = str(lost).splitlines()[0] if str(lost) else type(lost).__name__
            _end(job, ChangeStatus.FAILED, f"the database connection was lost ({why}), so "
                 "the job stopped before its next step")  # fmt: skip
        except Exception as exc:  # keep the job out of `running`, with the error on the row
            _end(job, ChangeStatus.FAILED, f"internal error: {type(exc).__name__}: {exc}")
            raise
        finally:
            job.release_lease()
    change.refresh_from_db()
    return change


def recover_interrupted(now: dt.datetime | None = None) -> list[int]:
    """Mark jobs whose heartbeat stopped as interrupted and free their host.

    A running job is left alone while its lease is live: the holder renews it every quarter
    lease, also during a long command. A job that claimed its row but never took the lease is
    given one lease length to do so.
    """
    now = now or timezone.now()
    recovered = []
    running = ChangeRequest.objects.filter(status=ChangeStatus.RUNNING).select_related("host")
    for change in running:
        if not leases.heartbeat_stopped(change, now):
            continue
        with transaction.atomic():
            released = leases.lease_free(change=change)
            # The step the worker died in never wrote its audit event: this one names what it
            # had sent, so the log still accounts for every command the host received.
            unfinished = steps_close_unfinished(
                change=change, why="interrupted: the worker stopped during this step", now=now
            )
            # A drained host stays out of rotation: nothing here may send it a command.
            drained = drain.interrupted_note(change)
            reason = "the worker's heartbeat stopped (killed or partitioned)"
            ended = lifecycle.change_transition(
                change=change,
                source=ChangeStatus.RUNNING,
                target=ChangeStatus.INTERRUPTED,
                reason=f"{reason}; {drained['note']}" if drained else reason,
                action=AuditAction.CHANGE_INTERRUPTED,
                snapshot=change.snapshot,
                data={
                    "lease_released": released,
                    "unfinished_steps": unfinished,
                    **({"drain": drained} if drained else {}),
                },
                now=now,
            )
            if not ended:
                transaction.set_rollback(True)  # someone else ended it: keep their lease too
                continue
        recovered.append(change.pk)
        # As when a job ends by itself: the host's verdict weighs the last change's outcome.
        services.host_health_update(host=change.host, ended_change=change.pk)
    return recovered


def queued_too_long(now: dt.datetime | None = None) -> list[int]:
    """Changes still queued JOB_REQUEUE_AFTER_SECONDS after they were queued (requested, or
    approved): their message may be gone with a restarted broker (docker-compose runs Redis
    without persistence), or never have reached it. The recovery sweep sends them again; a
    second message for a change is harmless, since only one worker can claim it."""
    now = now or timezone.now()
    cutoff = now - dt.timedelta(seconds=settings.JOB_REQUEUE_AFTER_SECONDS)
    return list(
        ChangeRequest.objects.filter(status=ChangeStatus.QUEUED)
        .annotate(queued_at=Coalesce(Max("approvals__created_at"), "created_at"))
        .filter(queued_at__lte=cutoff)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
