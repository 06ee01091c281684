"""Evaluations on /metrics: the newest benchmark and coherence suite of each deployment's
current and previous revision, with the figures the revision comparison page shows."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from deployments.models import DeploymentRevision, Evaluation
from tests import factories as f
from tests.revision_history import CHECKS, make_week_history, suite_results

pytestmark = pytest.mark.django_db

KIMI_INT4 = "moonshotai/Kimi-K2.5 (INT4)"
MINIMAX_FP8 = "MiniMaxAI/MiniMax-M2.5 (FP8)"


def revision(deployment, number: int) -> DeploymentRevision:
    return DeploymentRevision.objects.get(deployment=deployment, number=number)


def newest(deployment, number: int, kind: str) -> Evaluation:
    return Evaluation.objects.filter(revision=revision(deployment, number), kind=kind).first()


def test_the_serving_revision_and_the_one_before_it_are_series(operator, scrape):
    deployment = make_week_history(f.make_host("gpu-01"), operator)
    metrics = scrape()

    throughput = metrics.series("controlplane_benchmark_output_tokens_per_second")
    # r4 serves (INT4) and r3 (FP8) served before it; r1 and r2 are history, not series.
    shown = {(ls["revision"], ls["role"], ls["model"]) for ls, _ in throughput}
    assert shown == {("4", "current", KIMI_INT4), ("3", "previous", MINIMAX_FP8)}
    bench = newest(deployment, 4, "benchmark")
    level = {lv["concurrency"]: lv for lv in bench.levels}[64]
    at64 = {
        "host": "gpu-01", "unit": f.UNIT, "revision": "4", "model": KIMI_INT4, "role": "current",
        "profile": "standard", "concurrency": "64",
    }  # fmt: skip
    tok_s = metrics.value("controlplane_benchmark_output_tokens_per_second", **at64)
    assert tok_s == level["output_tok_s"] == pytest.approx(2200, rel=0.1)
    assert (
        metrics.value("controlplane_benchmark_requests_per_second", **at64) == level["requests_s"]
    )
    assert metrics.value("controlplane_benchmark_errors", **at64) == 0
    ttft = metrics.value("controlplane_benchmark_ttft_seconds", **at64, stat="p99")
    assert ttft == pytest.approx(level["ttft_ms"]["p99"] / 1000)
    tpot = metrics.value("controlplane_benchmark_tpot_seconds", **at64, stat="mean")
    assert tpot == pytest.approx(level["tpot_ms"]["mean"] / 1000)
    # These levels were stored before ITL was per chunk: their per-chunk ITL is unknown, so
    # it is left out rather than shown as the per-token figure it was.
    assert metrics.series("controlplane_benchmark_itl_seconds", **at64) == []
    assert len(metrics.series("controlplane_benchmark_ttft_seconds", revision="4")) == 4 * 2
    run = {k: v for k, v in at64.items() if k != "concurrency"}
    assert metrics.value("controlplane_benchmark_passed", **run) == 1
    finished = metrics.value("controlplane_benchmark_timestamp_seconds", **run)
    assert finished == bench.finished_at.timestamp()


def test_the_newest_suite_is_counted_by_outcome(operator, scrape):
    deployment = make_week_history(f.make_host("gpu-01"), operator)
    r4 = revision(deployment, 4)
    failing = suite_results(("factual", "five-token prompt"))
    failing["checks"][2]["outcome"] = "inconclusive"
    later = timezone.now()
    Evaluation.objects.create(
        deployment=deployment, revision=r4, phase="on_demand", kind="coherence",
        started_at=later, finished_at=later, passed=False, results={"checks": failing["checks"]},
    )  # fmt: skip
    # A run still going has no outcome yet: the finished one before it is what is shown.
    Evaluation.objects.create(
        deployment=deployment, revision=r4, phase="on_demand", kind="coherence",
        started_at=later + dt.timedelta(seconds=5),
    )  # fmt: skip
    metrics = scrape()

    current = {
        "host": "gpu-01", "unit": f.UNIT, "revision": "4", "model": KIMI_INT4, "role": "current"
    }  # fmt: skip
    counts = {
        ls["outcome"]: v for ls, v in metrics.series("controlplane_coherence_checks", **current)
    }
    assert counts == {"passed": len(CHECKS) - 3, "failed": 2, "inconclusive": 1, "skipped": 0}
    assert metrics.value("controlplane_coherence_passed", **current) == 0
    assert metrics.value("controlplane_coherence_timestamp_seconds", **current) == (
        later.timestamp()
    )
    previous = metrics.series("controlplane_coherence_passed", role="previous")
    assert [(ls["revision"], v) for ls, v in previous] == [("3", 1.0)]


def test_after_a_rollback_the_revision_that_failed_is_the_previous_one(operator, scrape):
    deployment = make_week_history(f.make_host("gpu-01"), operator)
    # Back to r3 (as a restore does): r4, the newest other revision, is now the previous one.
    type(deployment).objects.filter(pk=deployment.pk).update(
        current_revision=revision(deployment, 3)
    )
    metrics = scrape()
    roles = {
        (ls["revision"], ls["role"]) for ls, _ in metrics.series("controlplane_coherence_passed")
    }
    assert roles == {("3", "current"), ("4", "previous")}


def test_a_level_that_did_not_run_has_no_figures(operator, scrape):
    deployment = make_week_history(f.make_host("gpu-01"), operator)
    bench = newest(deployment, 4, "benchmark")
    results = dict(bench.results)
    results["levels"] = [*results["levels"][:1], {"concurrency": 8, "error": "timed out"}]
    later = timezone.now()
    Evaluation.objects.create(
        deployment=deployment, revision=bench.revision, phase="on_demand", kind="benchmark",
        profile=bench.profile, started_at=later, finished_at=later, passed=False,
        results=results,
    )  # fmt: skip
    metrics = scrape()
    levels = metrics.series("controlplane_benchmark_output_tokens_per_second", revision="4")
    assert [ls["concurrency"] for ls, _ in levels] == ["1"]
    assert metrics.series("controlplane_benchmark_passed", revision="4")[0][1] == 0


def test_a_deployment_never_evaluated_has_no_evaluation_series(scrape):
    f.make_deployment(f.make_host("gpu-01"), f.make_catalog()["NVFP4"])
    metrics = scrape()
    assert metrics.series("controlplane_coherence_checks") == []
    assert metrics.series("controlplane_benchmark_output_tokens_per_second") == []


def test_a_scrape_costs_the_same_queries_for_one_history_or_three(client, metrics_token, operator):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {metrics_token}")
        assert response.status_code == 200
        return len(captured.captured_queries)

    make_week_history(f.make_host("gpu-01"), operator)
    few = queries()
    for n in (2, 3):
        make_week_history(f.make_host(f"gpu-0{n}", port=2200 + n), operator)
    assert queries() == few
