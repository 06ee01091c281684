"""Whether a finished change lets its wave go on (deployments.rollouts.gates.change_judged)."""

from __future__ import annotations

import pytest

from deployments import lifecycle as change_lifecycle
from deployments.choices import ChangeStatus, EvaluationKind, EvaluationPhase
from deployments.models import Evaluation
from deployments.rollouts.choices import GateCheck, RolloutHostStatus
from deployments.rollouts.gates import change_judged

from .conftest import approved, end_change, swap_rollout, take_turns

pytestmark = pytest.mark.django_db
H = RolloutHostStatus
BENCH = {"name": "standard"}


@pytest.fixture
def change(operator, approver, fleet, catalog):
    rollout = approved(swap_rollout(operator, fleet, catalog["INT4"]), approver)
    return take_turns(rollout)[0].change


def judged(change, benchmark=BENCH, margin=10):
    change.refresh_from_db()
    return change_judged(change=change, benchmark=benchmark, margin_pct=margin)


@pytest.mark.parametrize(
    ("before", "after", "margin", "passed"),
    [(1000, 950, 10, True), (1000, 900, 10, True), (1000, 899, 10, False), (1000, 500, 60, True)],
)
def test_the_benchmark_margin_is_of_the_hosts_own_baseline(change, before, after, margin, passed):
    end_change(change, bench=(before, after))
    found = judged(change, margin=margin)
    assert found.passed is passed
    assert found.figures["ratio"] == round(after / before, 3)
    if not passed:
        assert (
            found.check == GateCheck.BENCHMARK and "the margin allows down to 90%" in found.failure
        )


def test_without_a_benchmark_asked_only_the_suite_counts(change) -> None:
    end_change(change, bench=(1000, 10))
    assert judged(change, benchmark=None).passed


def test_no_baseline_to_compare_with_fails_the_benchmark(change) -> None:
    end_change(change, bench=(1000, 2000))
    Evaluation.objects.filter(change=change, phase=EvaluationPhase.BASELINE).update(passed=False)
    found = judged(change)
    assert found.check == GateCheck.BENCHMARK and "no baseline of this host" in found.failure


def test_figures_that_cannot_be_compared_fail_the_benchmark(change) -> None:
    end_change(change, bench=(1000, 2000))
    after = Evaluation.objects.get(change=change, phase=EvaluationPhase.AFTER, kind="benchmark")
    after.results["profile"]["output_tokens"] = 64
    after.save(update_fields=["results"])
    assert "not comparable" in judged(change).failure


def test_a_benchmark_that_did_not_run_fails(change) -> None:
    end_change(change)
    found = judged(change)
    assert found.check == GateCheck.BENCHMARK and found.failure.endswith("did not run")


def test_a_succeeded_change_without_a_passing_suite_fails(change) -> None:
    end_change(change)
    Evaluation.objects.filter(change=change, kind=EvaluationKind.COHERENCE).delete()
    found = judged(change, benchmark=None)
    assert found.status == H.FAILED and found.check == GateCheck.COHERENCE


def test_a_change_its_job_restored_is_rolled_back_naming_the_suite(change) -> None:
    end_change(change, ChangeStatus.ROLLED_BACK, coherent=False, reason="incoherent")
    found = judged(change)
    assert found.status == H.ROLLED_BACK and found.check == GateCheck.COHERENCE
    assert found.failure == (
        "coherence suite after the change: failed 2 of 6 checks (factual, arithmetic)"
    )


def test_an_interrupted_change_fails_the_host(change) -> None:
    change_lifecycle.change_transition(change=change, source="queued", target="running")
    change_lifecycle.change_transition(
        change=change, source="running", target="interrupted", reason="the worker died"
    )
    found = judged(change)
    assert found.status == H.FAILED and found.check == GateCheck.CHANGE
    assert found.failure == f"change #{change.pk} interrupted: the worker died"


def test_a_change_that_never_touched_the_host_skips_it(change) -> None:
    change_lifecycle.change_transition(
        change=change, source="queued", target="drifted", reason="the host drifted"
    )
    found = judged(change)
    assert found.status == H.SKIPPED and not found.check
    assert found.skip_reason == f"its change #{change.pk} drifted: the host drifted"
