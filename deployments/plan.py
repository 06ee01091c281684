"""What each kind of change does to the host, step by step, and how it is undone."""

from __future__ import annotations

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from hosts import commands
from hosts.ssh import SSHFailure

from . import verification
from .choices import REVISION_KINDS, SERVING_KINDS, ChangeKind, ChangeStatus
from .job import Job
from .models import DeploymentRevision
from .outcomes import JobEnded, VerificationFailed


def apply(job: Job) -> None:
    """Carry out the change, then verify it. Raises VerificationFailed if it did not work."""
    kind = job.change.kind
    target = job.change.target_revision
    if kind in REVISION_KINDS:
        assert target is not None
        write_revision(job, target)
        systemctl(job, "restart")
    elif kind == ChangeKind.STOP:
        systemctl(job, "stop")
        verification.wait_inactive(job)
    else:
        systemctl(job, "start" if kind == ChangeKind.START else "restart")
    revision = target or job.change.from_revision
    if kind in SERVING_KINDS and revision is not None:
        verification.wait_healthy(job)
        verification.smoke(job, revision)
        if job.change.params.get("benchmark"):
            verification.benchmark(job, revision)
    verification.verify_after(job, revision)


def write_revision(job: Job, revision: DeploymentRevision) -> None:
    unit_file = commands.write_unit_file(job.deployment.unit)
    with job.step(f"write unit file (revision {revision.number})") as step:
        job.destructive()
        job.shell.run_or_fail(step, unit_file, stdin=revision.unit_text)
    with job.step("systemctl daemon-reload") as step:
        job.shell.run_or_fail(step, commands.daemon_reload())


def systemctl(job: Job, action: str) -> None:
    with job.step(f"systemctl {action}") as step:
        job.destructive()
        job.shell.run_or_fail(step, commands.unit_action(action, job.deployment.unit))


def restore(job: Job, why: str) -> None:
    """Put the previous revision back and verify it; ends the job rolled_back or failed."""
    previous = job.change.from_revision
    assert previous is not None
    audit.record(
        action=AuditAction.CHANGE_ROLLBACK_STARTED,
        target=job.change,
        host=job.host,
        snapshot=job.change.snapshot,
        correlation_id=job.change.correlation_id,
        data={"why": why, "to_revision": previous.number},
    )
    try:
        write_revision(job, previous)
        systemctl(job, "restart")
        verification.wait_healthy(job)
        verification.smoke(job, previous)
        verification.verify_after(job, previous)
    except (VerificationFailed, SSHFailure) as exc:
        raise JobEnded(
            ChangeStatus.FAILED,
            f"{why}; restoring revision {previous.number} failed too: {exc}",
        ) from exc
    raise JobEnded(
        ChangeStatus.ROLLED_BACK,
        f"{why}; restored revision {previous.number}, verified healthy",
    )
