"""Reads for change pages and queues."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page
from django.db.models import QuerySet

from controlplane.audit.actions import AuditAction
from controlplane.paging import numbered_page
from hosts.scope import rows_visible

from .choices import ChangeStatus, EvaluationKind, EvaluationPhase, StepStatus
from .models import ChangeRequest, Evaluation, JobStep

CHANGE_RELATED = (
    "host",
    "deployment",
    "snapshot",
    "from_revision__model",
    "target_revision__model",
    "before_snapshot",
    "after_snapshot",
    "failure_snapshot",
)


def approvals_waiting(*, user: Any) -> QuerySet[ChangeRequest]:
    """The approvals queue of the hosts `user` sees, oldest first (index
    change_status_created), with only the columns its rows show: no snapshot is read, so a row
    costs no JSON however big the state was."""
    return (
        rows_visible(user, ChangeRequest.objects.filter(status=ChangeStatus.PENDING_APPROVAL))
        .select_related("host", "deployment", "target_revision__model")
        .only(
            "created_at",
            "requested_by_name",
            "kind",
            "reason",
            "host__name",
            "deployment__unit",
            "target_revision__model__name",
            "target_revision__model__variant",
        )
        .order_by("created_at", "pk")
    )


def approvals_page(*, user: Any, page: str | None = None) -> tuple[Page[ChangeRequest], str]:
    """One page of the approvals queue, and a note when `page` was not a page of it."""
    return numbered_page(approvals_waiting(user=user), page)


def recent_changes(*, user: Any, limit: int = 50) -> QuerySet[ChangeRequest]:
    """The newest changes of the hosts `user` sees."""
    qs = ChangeRequest.objects.select_related(*CHANGE_RELATED).order_by("-created_at")
    return rows_visible(user, qs)[:limit]


def change_for_page(pk: int, *, user: Any) -> ChangeRequest:
    """A change, if `user` sees its host (ChangeRequest.DoesNotExist otherwise)."""
    return rows_visible(user, ChangeRequest.objects.select_related(*CHANGE_RELATED)).get(pk=pk)


@dataclass(frozen=True)
class EvaluationRow:
    """One kind of evaluation of a change, before and after it (and after a restore)."""

    kind: str
    before: Evaluation | None = None
    after: Evaluation | None = None
    restored: Evaluation | None = None


@dataclass(frozen=True)
class ChangeStory:
    """What the change page leads with: what the request rested on when it was made (the
    `change.requested` event keeps the snapshot's age and the pre-flight it passed), the
    evaluations before and after, and where the job is."""

    requested: dict[str, Any] = field(default_factory=dict)
    evaluations: list[EvaluationRow] = field(default_factory=list)
    steps: int = 0
    failed_steps: int = 0
    current_step: JobStep | None = None


def change_story(
    *, events: Iterable[Any], evaluations: Iterable[Evaluation], steps: Iterable[JobStep]
) -> ChangeStory:
    """The change page's lead, from rows the page reads anyway (no query of its own)."""
    requested: dict[str, Any] = next(
        (e.data for e in events if e.action == AuditAction.CHANGE_REQUESTED), {}
    )
    steps = list(steps)
    running = [s for s in steps if s.status == StepStatus.RUNNING]
    return ChangeStory(
        requested=requested or {},
        evaluations=evaluation_rows(evaluations),
        steps=len(steps),
        failed_steps=sum(1 for s in steps if s.status == StepStatus.FAILED),
        current_step=running[-1] if running else None,
    )


def evaluation_rows(evaluations: Iterable[Evaluation]) -> list[EvaluationRow]:
    """The newest run of each kind per phase, coherence first."""
    found: dict[str, dict[str, Evaluation]] = {}
    for e in evaluations:  # in the order they ran: a later run of a phase replaces an earlier
        found.setdefault(e.kind, {})[e.phase] = e
    rows = []
    for kind in (EvaluationKind.COHERENCE, EvaluationKind.BENCHMARK):
        phases = found.get(kind)
        if phases:
            rows.append(
                EvaluationRow(
                    kind=str(kind.label),
                    before=phases.get(EvaluationPhase.BASELINE),
                    after=phases.get(EvaluationPhase.AFTER),
                    restored=phases.get(EvaluationPhase.RESTORE),
                )
            )
    return rows
