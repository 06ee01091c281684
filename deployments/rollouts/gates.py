"""Whether a host's change let its wave go on: the change succeeded, its coherence suite passed
after the change, and (when the rollout asks for a benchmark) its throughput is within the
margin of the host's own baseline, the same benchmark run on the same host right before its
change (or, failing that, the baseline of the revision it served).

A change that never touched the host (drifted at execution, cancelled, rejected) is no verdict
on the rollout: the host is skipped and reported, as one that no longer matched is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..choices import ChangeStatus, EvaluationKind, EvaluationPhase
from ..evaluation.benchmark import throughput_ratio
from ..evaluation.selectors import revision_baseline
from ..models import ChangeRequest, Evaluation
from .choices import GateCheck, RolloutHostStatus

H = RolloutHostStatus
# Ended without a destructive command run on the host: nothing to judge, nothing to undo.
UNTOUCHED = (ChangeStatus.DRIFTED, ChangeStatus.CANCELLED, ChangeStatus.REJECTED)


@dataclass(frozen=True)
class Judgement:
    """Where a host's turn ended: its status, and which check failed (and how) if one did."""

    status: str
    check: str = ""
    failure: str = ""
    skip_reason: str = ""
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == H.SUCCEEDED


def _latest(change: ChangeRequest, kind: str, phase: str) -> Evaluation | None:
    return (
        Evaluation.objects.filter(change=change, kind=kind, phase=phase, finished_at__isnull=False)
        .order_by("-started_at", "-pk")
        .first()
    )


def change_judged(
    *, change: ChangeRequest, benchmark: dict[str, Any] | None, margin_pct: int
) -> Judgement:
    """The gate for one finished change of a rollout."""
    outcome = ChangeStatus(change.status)
    if outcome in UNTOUCHED:
        return Judgement(
            H.SKIPPED,
            skip_reason=f"its change #{change.pk} {outcome.label}: {change.status_reason}",
        )
    suite = _latest(change, EvaluationKind.COHERENCE, EvaluationPhase.AFTER)
    incoherent = suite is not None and suite.passed is not True
    if outcome != ChangeStatus.SUCCEEDED:
        status = H.ROLLED_BACK if outcome == ChangeStatus.ROLLED_BACK else H.FAILED
        if incoherent:
            assert suite is not None
            return Judgement(
                status,
                GateCheck.COHERENCE,
                f"coherence suite after the change: {suite.summary}",
                figures={"evaluation": suite.pk},
            )
        return Judgement(
            status, GateCheck.CHANGE, f"change #{change.pk} {outcome.label}: {change.status_reason}"
        )
    if suite is None or incoherent:
        summary = suite.summary if suite is not None else "did not run"
        return Judgement(
            H.FAILED,
            GateCheck.COHERENCE,
            f"coherence suite after the change: {summary}",
            figures={"evaluation": suite.pk if suite is not None else None},
        )
    if not benchmark:
        return Judgement(H.SUCCEEDED, figures={"coherence": suite.pk})
    return _benchmark_gate(change, margin_pct, suite)


def _benchmark_gate(change: ChangeRequest, margin_pct: int, suite: Evaluation) -> Judgement:
    floor = 1 - margin_pct / 100
    after = _latest(change, EvaluationKind.BENCHMARK, EvaluationPhase.AFTER)
    if after is None or after.passed is not True:
        summary = after.summary if after is not None else "did not run"
        return Judgement(
            H.FAILED,
            GateCheck.BENCHMARK,
            f"benchmark after the change: {summary}",
            figures={"after": after.pk if after is not None else None},
        )
    base = _latest(change, EvaluationKind.BENCHMARK, EvaluationPhase.BASELINE)
    if (base is None or base.passed is not True) and change.from_revision is not None:
        base = revision_baseline(change.from_revision)
    if base is None or base.passed is not True:
        return Judgement(
            H.FAILED,
            GateCheck.BENCHMARK,
            "benchmark: no baseline of this host to compare with (the run before the change "
            "did not complete, and its revision has none)",
            figures={"after": after.pk},
        )
    found = throughput_ratio(after.results, base.results)
    figures: dict[str, Any] = {
        "after": after.pk,
        "baseline": base.pk,
        "floor": round(floor, 3),
        "coherence": suite.pk,
    }
    if found is None:
        return Judgement(
            H.FAILED,
            GateCheck.BENCHMARK,
            "benchmark: not comparable with the host's baseline (other lengths or prompts, or "
            "no concurrency level in common)",
            figures=figures,
        )
    ratio, level = found
    figures.update(ratio=round(ratio, 3), concurrency=level)
    if ratio < floor:
        return Judgement(
            H.FAILED,
            GateCheck.BENCHMARK,
            f"benchmark: {ratio:.0%} of this host's baseline throughput at {level} concurrent; "
            f"the margin allows down to {floor:.0%}",
            figures=figures,
        )
    return Judgement(H.SUCCEEDED, figures=figures)
