"""What each kind of change does to the host, step by step, and how it is undone."""

from __future__ import annotations

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from hosts import commands
from hosts.ssh import SSHFailure

from .. import kinds, revisions
from ..choices import ChangeStatus, CheckOutcome, EvaluationPhase
from ..models import DeploymentRevision, Evaluation
from . import evaluations, repair, verification
from .job import Job
from .outcomes import JobEnded, VerificationFailed


def apply(job: Job) -> None:
    """Carry out the change, then verify it. Raises VerificationFailed if it did not work."""
    declared = kinds.spec(job.change.kind)  # an undeclared kind raises: nothing is touched
    target = job.change.target_revision
    if declared.writes_revision:
        assert target is not None
        write_revision(job, target)
    if declared.reinstalls_engine:
        repair.reinstall(job)
    systemctl(job, declared.systemctl)
    if declared.leaves_unit_stopped:
        verification.wait_inactive(job)
    revision = target or job.change.from_revision
    if declared.serves and revision is not None:
        verification.wait_healthy(job)
        verification.coherent(job, revision, EvaluationPhase.AFTER)
        verification.measure(job, revision, EvaluationPhase.AFTER)
    verification.verify_after(job, revision)


def write_revision(job: Job, revision: DeploymentRevision) -> None:
    unit_file = commands.write_unit_file(job.deployment.unit)
    number = revisions.revision_number_assign(revision)
    with job.step(f"write unit file (revision {number})") as step:
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
        suite = evaluations.coherence_run(job, previous, EvaluationPhase.RESTORE)
        verification.verify_after(job, previous)
    except (VerificationFailed, SSHFailure) as exc:
        raise JobEnded(
            ChangeStatus.FAILED,
            f"{why}; restoring revision {previous.number} failed too: {exc}",
        ) from exc
    regressed = _restore_regressions(job, suite)
    if regressed:
        raise JobEnded(
            ChangeStatus.FAILED,
            f"{why}; restored revision {previous.number}, but it fails {regressed}",
        )
    said = "verified healthy and coherent"
    if not suite.passed:
        said = (
            f"healthy, and it fails the same checks it failed before the change ({suite.summary})"
        )
    raise JobEnded(ChangeStatus.ROLLED_BACK, f"{why}; restored revision {previous.number}, {said}")


def _restore_regressions(job: Job, suite: Evaluation) -> str:
    """What the restored revision fails that it did not fail before the change ("" if nothing).

    Without a baseline there is no telling, so every failed check counts: a restore is only
    good when the revision is back where it was.
    """
    if suite.passed:
        return ""
    failed = failed_checks(suite)
    before = set(failed_checks(job.baseline)) if job.baseline is not None else set()
    new = [name for name in failed if name not in before]
    return ", ".join(new)


def failed_checks(evaluation: Evaluation) -> list[str]:
    return [
        c["name"]
        for c in evaluation.results.get("checks", [])
        if c.get("outcome") == CheckOutcome.FAILED
    ]
