"""Celery tasks: thin wrappers around deployments.execution.runner."""

from __future__ import annotations

from celery import shared_task

from controlplane.audit import context as audit_context
from controlplane.audit.services import SYSTEM_BEAT, SYSTEM_WORKER

from . import dispatch
from .execution import runner
from .rollouts import orchestrator
from .services import diagnostics


@shared_task(name=dispatch.EXECUTE_CHANGE, acks_late=True)
def execute_change(change_id: int) -> str | None:
    with audit_context.acting(SYSTEM_WORKER):
        change = runner.change_execute(change_id=change_id)
        return change.status if change else None


@shared_task(name=dispatch.GPU_DIAGNOSTIC, acks_late=True)
def gpu_diagnostic(host_id: int, level: int) -> int | None:
    """DCGM's diagnostic an operator asked for; the snapshot's id, None if it may not run."""
    with audit_context.acting(SYSTEM_WORKER):
        snapshot = diagnostics.gpu_diagnostic_run(host_id=host_id, level=level)
        return snapshot.pk if snapshot is not None else None


@shared_task(name=dispatch.RECOVER_INTERRUPTED_JOBS)
def recover_interrupted_jobs() -> list[int]:
    """Beat's job recovery: jobs whose worker died end interrupted; queued jobs whose message
    was lost (a restarted broker) are sent again."""
    with audit_context.acting(SYSTEM_BEAT):
        recovered = runner.recover_interrupted()
    for change_id in runner.queued_too_long():
        execute_change.delay(change_id)
    return recovered


@shared_task(name=dispatch.ROLLOUT_ADVANCE, acks_late=True)
def rollout_advance(rollout_id: int) -> str | None:
    """Look at a rollout once: record its finished changes, decide, take the turns it has room
    for. Safe to run twice at once, or again after a worker died in it."""
    with audit_context.acting(SYSTEM_WORKER):
        rollout = orchestrator.rollout_advance(rollout_id=rollout_id)
        return rollout.status if rollout else None


@shared_task(name=dispatch.ROLLOUTS_SWEEP)
def rollouts_sweep() -> list[int]:
    """Beat's look at every rollout still going: one that no event moved (a lost message, a
    worker killed mid-turn, a claim to take over, a deadline) moves on from its record."""
    due = orchestrator.rollouts_due()
    for rollout_id in due:
        rollout_advance.delay(rollout_id)
    return due
