"""Reads of evaluations: a revision's baseline, the previous suite run, and what the health
verdict weighs (in two queries for any number of deployments)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from ..choices import CheckOutcome, EvaluationKind, EvaluationPhase
from ..health import Evaluation as EvaluationEvidence
from ..models import Deployment, DeploymentRevision, Evaluation
from .benchmark import throughput_ratio

FINISHED = {"finished_at__isnull": False}


def previous_suite(evaluation: Evaluation) -> dict[str, Any] | None:
    """The suite run `evaluation` is compared with, as coherence.compare_with takes it: within
    a change, its baseline (what served before it, also for the restored revision); otherwise,
    or without a baseline, the deployment's suite run before this one."""
    finished = Evaluation.objects.filter(
        deployment_id=evaluation.deployment_id,
        kind=EvaluationKind.COHERENCE,
        passed__isnull=False,
        **FINISHED,
    ).exclude(pk=evaluation.pk)
    earlier = None
    if evaluation.change_id is not None and evaluation.phase != EvaluationPhase.BASELINE:
        earlier = finished.filter(
            change_id=evaluation.change_id, phase=EvaluationPhase.BASELINE
        ).first()
    if earlier is None:
        earlier = (
            finished.filter(started_at__lte=evaluation.started_at)
            .order_by("-started_at", "-pk")
            .first()
        )
    if earlier is None:
        return None
    return {
        "evaluation": earlier.pk,
        "revision": earlier.revision.number,
        "checks": list(earlier.results.get("checks", [])),
    }


def revision_baseline(revision: DeploymentRevision) -> Evaluation | None:
    """A revision's own baseline throughput: its first passing benchmark after a change."""
    return _baseline_query(revision.pk).first()


def _baseline_query(revision_id: Any) -> QuerySet[Evaluation]:
    return Evaluation.objects.filter(
        revision_id=revision_id,
        kind=EvaluationKind.BENCHMARK,
        phase=EvaluationPhase.AFTER,
        passed=True,
        **FINISHED,
    ).order_by("started_at", "pk")


def _latest_query(revision_id: Any, kind: str) -> QuerySet[Evaluation]:
    return Evaluation.objects.filter(
        revision_id=revision_id, kind=kind, passed__isnull=False, **FINISHED
    ).order_by("-started_at", "-pk")


def health_evaluations(deployments: Iterable[Deployment]) -> dict[int, EvaluationEvidence]:
    """Per deployment, what its serving revision's latest suite and benchmark say: whether it
    is coherent (and which checks failed), and its throughput against its own baseline."""
    revision_ids = {d.current_revision_id for d in deployments if d.current_revision_id}
    if not revision_ids:
        return {}
    pk = OuterRef("pk")
    latest = DeploymentRevision.objects.filter(pk__in=revision_ids).annotate(
        suite=Subquery(_latest_query(pk, EvaluationKind.COHERENCE).values("pk")[:1]),
        bench=Subquery(_latest_query(pk, EvaluationKind.BENCHMARK).values("pk")[:1]),
        base=Subquery(_baseline_query(pk).values("pk")[:1]),
    )
    # the three ids alone: not the revisions' units and results (every probe round asks)
    picked = {pk: ids for pk, *ids in latest.values_list("pk", "suite", "bench", "base")}
    wanted = {i for ids in picked.values() for i in ids if i is not None}
    rows = {e.pk: e for e in Evaluation.objects.filter(pk__in=wanted)}
    out = {}
    for deployment in deployments:
        ids = picked.get(deployment.current_revision_id or 0)
        if ids is None:
            continue
        suite, bench, base = (rows.get(i) if i is not None else None for i in ids)
        evidence = _evidence(suite, bench, base)
        if evidence is not None:
            out[deployment.pk] = evidence
    return out


def _evidence(
    suite: Evaluation | None, bench: Evaluation | None, base: Evaluation | None
) -> EvaluationEvidence | None:
    if suite is None and bench is None:
        return None
    ratio = None
    if bench is not None and base is not None and bench.pk != base.pk:
        found = throughput_ratio(bench.results, base.results)
        ratio = found[0] if found else None
    failures = tuple(
        c["name"]
        for c in (suite.results.get("checks", []) if suite is not None else [])
        if c.get("outcome") == CheckOutcome.FAILED
    )
    times = [e.finished_at for e in (suite, bench) if e is not None and e.finished_at]
    return EvaluationEvidence(
        coherent=suite.passed if suite is not None else None,
        failures=failures,
        throughput_ratio=ratio,
        at=max(times) if times else None,
    )


def change_evaluations(change_id: int) -> QuerySet[Evaluation]:
    """A change's runs in the order they ran (baseline, after, restore)."""
    return (
        Evaluation.objects.filter(change_id=change_id)
        .select_related("revision__model")
        .order_by("started_at", "pk")
    )
