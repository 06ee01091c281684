"""Executing a change request as logged steps, under a fenced host lease.

Lifecycle: queued -> running -> succeeded | failed | rolled_back | drifted | cancelled |
interrupted (deployments.lifecycle). A job never ends `running`: if its worker dies, its
heartbeat stops and recover_interrupted() marks it.
"""

from __future__ import annotations

import datetime as dt
import json

from django.db import transaction
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

from . import lease as leases
from . import lifecycle, plan, services
from .choices import REVISION_KINDS, ChangeStatus
from .drift import execution_drift
from .job import Job
from .lease import LeaseLost
from .models import ChangeRequest, Deployment
from .outcomes import JobEnded, VerificationFailed

__all__ = ["Job", "LeaseLost", "change_execute", "recover_interrupted"]


def run(job: Job) -> None:
    """Check that the decision still holds, take the host, re-check the host itself, then
    act; a failed verification of a new revision restores the previous one."""
    basis = _check_decision(job)
    with job.step("take the host lease"):
        job.take_lease()
    _check_host(job, basis)
    try:
        plan.apply(job)
    except VerificationFailed as failure:
        if job.change.kind in REVISION_KINDS and job.change.from_revision is not None:
            plan.restore(job, str(failure))
        raise JobEnded(ChangeStatus.FAILED, str(failure)) from failure


def _check_decision(job: Job) -> StateSnapshot:
    """The snapshot the decision rests on, still fresh, with a valid approval if one is needed.

    An approval rests on the approver's own snapshot, checked to be materially the same as the
    request's; that newer one is what must still be fresh now.
    """
    change = job.change
    approval = services.approval_valid(change) if change.needs_approval else None
    basis = approval.snapshot if approval is not None else change.snapshot
    with job.step("check the snapshot is still fresh"):
        try:
            host_services.snapshot_require_fresh(snapshot=basis, host=job.host)
        except host_services.SnapshotNotUsable as exc:
            raise JobEnded(ChangeStatus.FAILED, f"refused at execution start: {exc}") from exc
    if change.needs_approval:
        with job.step("check the approval"):
            if change.params_digest != services.change_params_digest(change):
                raise JobEnded(ChangeStatus.FAILED, "the parameters changed after approval")
            if approval is None:
                raise JobEnded(ChangeStatus.FAILED, "no valid approval: it expired or was voided")
    return basis


def _check_host(job: Job, basis: StateSnapshot) -> None:
    """Probe again right before the first destructive command; any drift ends the job."""
    change = job.change
    with job.step("re-probe and compare with the decided snapshot") as step:
        before = job.shell.probe()
        ChangeRequest.objects.filter(pk=change.pk).update(before_snapshot=before)
        change.before_snapshot = before
        if before.status != SnapshotStatus.OK:
            raise JobEnded(
                ChangeStatus.FAILED, f"could not re-probe the host: {before.status} {before.error}"
            )
        drift = execution_drift(change=change, basis=basis, current=before)
        if drift:
            step.output = json.dumps(drift, indent=1)
            ChangeRequest.objects.filter(pk=change.pk).update(drift_report=drift)
            change.drift_report = drift
            raise JobEnded(ChangeStatus.DRIFTED, "the host drifted since the decision")


def _apply_revision_to_deployment(change: ChangeRequest) -> None:
    revision = change.target_revision
    if change.kind not in REVISION_KINDS or revision is None:
        return
    deployment = Deployment.objects.select_for_update().get(pk=change.deployment_id)
    deployment.current_revision = revision
    deployment.model = revision.model
    deployment.tensor_parallel_size = revision.tensor_parallel_size
    deployment.max_model_len = revision.max_model_len
    deployment.extra_args = revision.extra_args
    deployment.save(
        update_fields=[
            "current_revision",
            "model",
            "tensor_parallel_size",
            "max_model_len",
            "extra_args",
        ]
    )


def _end(change: ChangeRequest, status: str, reason: str) -> bool:
    """Record the outcome if the job still owns the row (a recovery may have ended it). A
    success makes its revision the deployment's current one in the same transaction."""
    change.refresh_from_db(fields=["before_snapshot", "after_snapshot", "drift_report"])
    with transaction.atomic():
        running = ChangeRequest.objects.select_for_update().filter(
            pk=change.pk, status=ChangeStatus.RUNNING
        )
        if not running.exists():
            return False
        if status == ChangeStatus.SUCCEEDED:
            _apply_revision_to_deployment(change)
        return lifecycle.change_transition(
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
            },
        )


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
            _end(change, ChangeStatus.SUCCEEDED, "verified healthy and coherent")
        except JobEnded as ended:
            _end(change, ended.status, ended.reason)
        except LeaseLost as lost:
            _end(change, ChangeStatus.INTERRUPTED, str(lost))
        except SSHFailure as failure:
            _end(change, ChangeStatus.FAILED, f"SSH: {failure.message}")
        except commands.UnsafeCommand as refused:  # a row that bypassed validation
            _end(change, ChangeStatus.FAILED, f"nothing sent: {refused}")
        except Exception as exc:  # keep the job out of `running`, with the error on the row
            _end(change, ChangeStatus.FAILED, f"internal error: {type(exc).__name__}: {exc}")
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
            ended = lifecycle.change_transition(
                change=change,
                source=ChangeStatus.RUNNING,
                target=ChangeStatus.INTERRUPTED,
                reason="the worker's heartbeat stopped (killed or partitioned)",
                action=AuditAction.CHANGE_INTERRUPTED,
                snapshot=change.snapshot,
                data={"lease_released": released},
                now=now,
            )
            if not ended:
                transaction.set_rollback(True)  # someone else ended it: keep their lease too
                continue
        recovered.append(change.pk)
    return recovered
