"""A deployment's revisions side by side: what each served (model, quantization, arguments, who
and when), its benchmark curves, its coherence results, and the diff of any two unit files.
Reads only; the revision comparison page renders what `revision_comparison` returns."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from ..choices import EvaluationKind
from ..models import Deployment, DeploymentRevision, Evaluation
from ..unit_files import serving_plan
from .selectors import revision_baseline


@dataclass(frozen=True)
class RevisionEntry:
    revision: DeploymentRevision
    current: bool
    benchmark: Evaluation | None  # its baseline benchmark, else its latest one
    benchmark_is_baseline: bool
    levels: dict[int, dict[str, Any]]  # concurrency -> that level's figures
    suite: Evaluation | None  # its latest coherence suite
    checks: dict[str, dict[str, Any]]  # check name -> its result in `suite`
    evaluations: list[Evaluation] = field(default_factory=list)  # every run, newest first

    @property
    def label(self) -> str:
        model = self.revision.model
        return f"r{self.revision.number} {model.name.split('/')[-1]} {model.variant}"


@dataclass(frozen=True)
class DiffLine:
    kind: str  # add | remove | hunk | context | header
    text: str


@dataclass(frozen=True)
class Comparison:
    deployment: Deployment
    entries: list[RevisionEntry]  # oldest first: the story reads down the page
    levels: list[int]
    check_names: list[str]
    chart: dict[str, Any]
    diff_from: DeploymentRevision | None = None
    diff_to: DeploymentRevision | None = None
    diff: list[DiffLine] = field(default_factory=list)
    review: list[str] = field(default_factory=list)  # unit_review of the two


def revision_comparison(
    deployment: Deployment, *, diff_from: int | None = None, diff_to: int | None = None
) -> Comparison:
    """Every revision of `deployment` with its evaluations; the unit diff of revisions
    `diff_from` and `diff_to` (numbers) when both exist."""
    revisions = list(
        deployment.revisions.filter(number__isnull=False)
        .select_related("model", "created_from_change")
        .order_by("number")
    )
    runs: dict[int, list[Evaluation]] = {r.pk: [] for r in revisions}
    for evaluation in Evaluation.objects.filter(deployment=deployment).select_related("change"):
        runs.setdefault(evaluation.revision_id, []).append(evaluation)
    entries = [_entry(r, runs[r.pk], r.pk == deployment.current_revision_id) for r in revisions]
    levels = sorted({level for e in entries for level in e.levels})
    names: list[str] = []
    for entry in entries:
        names += [n for n in entry.checks if n not in names]
    by_number = {r.number: r for r in revisions}
    a, b = by_number.get(diff_from or 0), by_number.get(diff_to or 0)
    return Comparison(
        deployment=deployment,
        entries=entries,
        levels=levels,
        check_names=names,
        chart=_chart(entries, levels),
        diff_from=a,
        diff_to=b,
        diff=unit_diff(a, b) if a is not None and b is not None else [],
        review=unit_review(a, b) if a is not None and b is not None else [],
    )


def _entry(revision: DeploymentRevision, runs: list[Evaluation], current: bool) -> RevisionEntry:
    finished = [e for e in runs if e.finished_at is not None and e.passed is not None]
    benches = [e for e in finished if e.kind == EvaluationKind.BENCHMARK]
    suites = [e for e in finished if e.kind == EvaluationKind.COHERENCE]
    baseline = revision_baseline(revision) if benches else None
    bench = baseline or (benches[0] if benches else None)  # runs come newest first
    levels = {
        int(level["concurrency"]): level
        for level in (bench.levels if bench is not None else [])
        if "output_tok_s" in level
    }
    suite = suites[0] if suites else None
    checks = {c["name"]: c for c in (suite.results.get("checks", []) if suite else [])}
    return RevisionEntry(
        revision=revision,
        current=current,
        benchmark=bench,
        benchmark_is_baseline=baseline is not None,
        levels=levels,
        suite=suite,
        checks=checks,
        evaluations=runs,
    )


def _chart(entries: list[RevisionEntry], levels: list[int]) -> dict[str, Any]:
    """What static/js/revision-charts.js draws: one line per benchmarked revision."""
    series = []
    for entry in entries:
        if not entry.levels:
            continue
        figures = [entry.levels.get(level) for level in levels]
        series.append(
            {
                "label": entry.label,
                "revision": entry.revision.number,
                "tok_s": [f["output_tok_s"] if f else None for f in figures],
                "ttft_p50_ms": [f["ttft_ms"]["p50"] if f else None for f in figures],
            }
        )
    return {"levels": levels, "series": series}


def unit_review(a: DeploymentRevision, b: DeploymentRevision) -> list[str]:
    """What going from revision `a` to `b` changes in what runs or how it is exposed, each with
    why it needs a second person: the comparison approvals use (policy.approval_reasons)."""
    changes = serving_plan.unit_differences(
        a.unit_text,
        b.unit_text,
        before_variables=a.file_variables,
        after_variables=a.file_variables,  # the environment files stay as the host has them
        harmless=settings.HARMLESS_ENGINE_FLAGS,
    )
    return [f"{c.describe()} ({c.why})" for c in changes if c.why]


def unit_diff(a: DeploymentRevision, b: DeploymentRevision) -> list[DiffLine]:
    """The unified diff of two revisions' unit files, line by line, classified for display."""
    lines = difflib.unified_diff(
        a.unit_text.splitlines(),
        b.unit_text.splitlines(),
        fromfile=f"revision {a.number} ({a.unit_sha256[:12]})",
        tofile=f"revision {b.number} ({b.unit_sha256[:12]})",
        lineterm="",
    )
    out = []
    for line in lines:
        if line.startswith(("---", "+++")):
            kind = "header"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "remove"
        else:
            kind = "context"
        out.append(DiffLine(kind, line))
    return out
