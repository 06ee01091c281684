"""Reads the change views need beyond deployments.selectors: list filters and the detail."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet

from deployments.models import ChangeRequest, Deployment, DeploymentRevision, Evaluation
from deployments.selectors import CHANGE_RELATED
from hosts.scope import rows_visible


def changes_filtered(*, user: Any, status: str = "", host: str = "") -> QuerySet[ChangeRequest]:
    """The changes of the hosts `user` sees, of one status or host when asked."""
    qs = rows_visible(user, ChangeRequest.objects.select_related(*CHANGE_RELATED))
    if status:
        qs = qs.filter(status=status)
    if host:
        qs = qs.filter(host__name=host)
    return qs


def change_with_history(pk: int) -> ChangeRequest | None:
    """A change with its steps, approvals and evaluations (in the order they ran)."""
    runs = Evaluation.objects.select_related("revision").order_by("started_at", "pk")
    return (
        ChangeRequest.objects.select_related(*CHANGE_RELATED)
        .prefetch_related("steps", "approvals", Prefetch("evaluations", queryset=runs))
        .filter(pk=pk)
        .first()
    )


def revisions_with_evaluations(deployment: Deployment) -> QuerySet[DeploymentRevision]:
    """A deployment's revisions with a summary of each run on them, newest run first."""
    runs = Evaluation.objects.select_related("revision").order_by("-started_at", "-pk")
    return (
        deployment.revisions.filter(number__isnull=False)
        .select_related("model")
        .prefetch_related(Prefetch("evaluations", queryset=runs))
    )


def revision_evaluations(revision: DeploymentRevision) -> QuerySet[Evaluation]:
    return Evaluation.objects.filter(revision=revision).select_related("revision")
