"""The step journal of a change job: each step a JobStep row and an audit event, naming the
snapshot the step rested on."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from typing import Any

from django.db import transaction

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from controlplane.clock import Clock
from controlplane.redaction import redact_text
from hosts.models import StateSnapshot

from ..choices import ChangeStatus, StepStatus
from ..models import ChangeRequest, JobStep
from .outcomes import JobEnded

MAX_OUTPUT_CHARS = 32 * 1024


class StepJournal:
    """Opens and closes a job's steps in order; a step's row and its audit event commit
    together when it ends, whether it succeeded or failed.

    Each step's audit event names the snapshot the job rests on when the step ends (its age
    measured then): the decision's until the job says which one it checks (`rest_on`), then
    each snapshot the job takes, from the step that takes it on.
    """

    def __init__(self, change: ChangeRequest, clock: Clock) -> None:
        self.change = change
        self.clock = clock
        self.seq = change.steps.count()
        self.snapshot: StateSnapshot = change.snapshot
        # Once a destructive command has run, the job finishes and verifies (or rolls back)
        # rather than stop on a cancel and leave the host half-changed.
        self.destructive_started = False

    @contextlib.contextmanager
    def step(self, name: str, *, check_cancel: bool = True) -> Iterator[JobStep]:
        """A step; it first stops the job if a cancel was asked for, unless `check_cancel` is
        off (what undoes a step, such as putting a drained host back, runs even then)."""
        if check_cancel:
            self.check_cancel()
        self.seq += 1
        step = JobStep.objects.create(
            change=self.change,
            seq=self.seq,
            name=name,
            status=StepStatus.RUNNING,
            started_at=self.clock.now(),
        )
        try:
            yield step
        except BaseException as exc:
            step.status = StepStatus.FAILED
            if not step.output:
                step.output = str(exc)[:MAX_OUTPUT_CHARS]
            self._close(step)
            raise
        else:
            step.status = StepStatus.SUCCEEDED
            self._close(step)

    def rest_on(self, snapshot: StateSnapshot) -> None:
        """From now on (the running step included), the job acts on what `snapshot` saw."""
        self.snapshot = snapshot

    def check_cancel(self) -> None:
        if self.destructive_started:
            return
        if ChangeRequest.objects.filter(pk=self.change.pk, cancel_requested=True).exists():
            raise JobEnded(ChangeStatus.CANCELLED, "cancelled between steps")

    def _close(self, step: JobStep) -> None:
        step.finished_at = self.clock.now()
        # What the host printed (a failed start's journal, a command's stderr) is host text.
        step.output = redact_text(step.output)
        with transaction.atomic():
            step.save(update_fields=["status", "output", "command", "exit_status", "finished_at"])
            audit.record(
                action=AuditAction.CHANGE_STEP,
                target=self.change,
                host=self.change.host,
                snapshot=self.snapshot,
                correlation_id=self.change.correlation_id,
                data={
                    "step": step.seq,
                    "name": step.name,
                    "status": step.status,
                    "command": step.command,
                    "exit_status": step.exit_status,
                    "seconds": step.duration_seconds,
                },
            )


def steps_close_unfinished(
    *, change: ChangeRequest, why: str, now: dt.datetime
) -> list[dict[str, Any]]:
    """Close, as failed, the steps a job left running (its worker died, or the database went
    away while it recorded the step), and say what they sent, for the audit event that ends the
    job: a step's audit event is written when it ends, so without this the commands of the step
    a job died in would be in no event. Each command line is written to its step before it is
    sent (deployments.execution.shell), so the last one listed may not have reached the host."""
    unfinished = list(
        JobStep.objects.select_for_update()
        .filter(change=change, status=StepStatus.RUNNING)
        .order_by("seq")
    )
    for step in unfinished:
        step.status = StepStatus.FAILED
        step.output = redact_text(f"{step.output}\n{why}".strip()[-MAX_OUTPUT_CHARS:])
        step.finished_at = now
        step.save(update_fields=["status", "output", "finished_at"])
    return [{"step": s.seq, "name": s.name, "command": s.command} for s in unfinished]
