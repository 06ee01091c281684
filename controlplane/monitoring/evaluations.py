"""Evaluations as Prometheus gauges: the newest benchmark and coherence suite of each
deployment's current and previous revision (monitoring.selectors.exposed_evaluations).

Cardinality is bounded by the fleet, not by history: two revisions per deployment, each with
one benchmark (a series per concurrency level and statistic) and one suite. A revision that
stops being current or previous leaves /metrics, and Prometheus keeps what it scraped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from deployments.choices import CheckOutcome, EvaluationKind
from deployments.models import Evaluation

REVISION = ["host", "unit", "revision", "model", "role"]
LEVEL = [*REVISION, "profile", "concurrency"]
STAT = [*LEVEL, "stat"]

# (family, the level's key holding its statistics, scale to seconds, what it measures)
LATENCIES: tuple[tuple[str, str, float, str], ...] = (
    ("benchmark_ttft_seconds", "ttft_ms", 0.001, "Time to first token"),
    ("benchmark_itl_seconds", "itl_ms", 0.001, "Inter-token latency, per streamed chunk"),
    ("benchmark_tpot_seconds", "tpot_ms", 0.001, "Time per output token after the first"),
)
# A statistic's key in a stored level as it is exposed: stat="p50" and so on. Whatever the
# level holds is exposed (today p50 and p99 of TTFT and ITL, the mean of TPOT), so a level
# that also records p90 shows it with no change here.
STATS = ("p50", "p90", "p99", "mean")

FAMILIES: tuple[tuple[str, str, list[str]], ...] = (
    (
        "benchmark_output_tokens_per_second",
        "Output tokens per second at each concurrency level, from the newest benchmark of the "
        "deployment's current (role=current) or previous (role=previous) revision.",
        LEVEL,
    ),
    (
        "benchmark_requests_per_second",
        "Completed requests per second at each concurrency level (same benchmark).",
        LEVEL,
    ),
    (
        "benchmark_errors",
        "Requests that failed at each concurrency level (same benchmark).",
        LEVEL,
    ),
    *(
        (name, f"{text} in seconds at each concurrency level, per stat (p50, p99, mean).", STAT)
        for name, _, _, text in LATENCIES
    ),
    (
        "benchmark_passed",
        "1 if the newest benchmark of the revision ran every level without a failed request.",
        [*REVISION, "profile"],
    ),
    (
        "benchmark_timestamp_seconds",
        "When that benchmark finished (Unix time).",
        [*REVISION, "profile"],
    ),
    (
        "coherence_checks",
        "Checks of the newest coherence suite run on the revision, per outcome (passed, failed, "
        "inconclusive, skipped); every outcome is present, zeros included.",
        [*REVISION, "outcome"],
    ),
    (
        "coherence_passed",
        "1 if that suite passed, 0 if it failed; absent when it had nothing to judge.",
        REVISION,
    ),
    ("coherence_timestamp_seconds", "When that suite finished (Unix time).", REVISION),
)


def evaluation_families(evaluations: list[Evaluation]) -> Iterator[Metric]:
    families = {
        name: GaugeMetricFamily(f"controlplane_{name}", text, labels=labels)
        for name, text, labels in FAMILIES
    }
    for evaluation in evaluations:
        labels = _revision_labels(evaluation)
        if evaluation.kind == EvaluationKind.BENCHMARK:
            _add_benchmark(families, labels, evaluation)
        else:
            _add_suite(families, labels, evaluation)
    yield from families.values()


def _revision_labels(evaluation: Evaluation) -> list[str]:
    deployment, revision = evaluation.deployment, evaluation.revision
    role = "current" if revision.pk == deployment.current_revision_id else "previous"
    return [deployment.host.name, deployment.unit, str(revision.number), str(revision.model), role]


def _add_benchmark(
    families: dict[str, GaugeMetricFamily], labels: list[str], evaluation: Evaluation
) -> None:
    profile = _profile_name(evaluation)
    run = [*labels, profile]
    if evaluation.passed is not None:
        families["benchmark_passed"].add_metric(run, float(evaluation.passed))
    if evaluation.finished_at is not None:
        families["benchmark_timestamp_seconds"].add_metric(run, evaluation.finished_at.timestamp())
    # A level that did not run holds only its reason: no figure below finds a number in it.
    for level in evaluation.levels:
        at = [*run, str(level.get("concurrency"))]
        for name, key in (
            ("benchmark_output_tokens_per_second", "output_tok_s"),
            ("benchmark_requests_per_second", "requests_s"),
            ("benchmark_errors", "errors"),
        ):
            value = _number(level.get(key))
            if value is not None:
                families[name].add_metric(at, value)
        for name, key, scale, _ in LATENCIES:
            figures = level.get(key)
            if not isinstance(figures, dict):
                continue
            for stat in STATS:
                value = _number(figures.get(stat))
                if value is not None:
                    families[name].add_metric([*at, stat], value * scale)


def _add_suite(
    families: dict[str, GaugeMetricFamily], labels: list[str], evaluation: Evaluation
) -> None:
    checks = (evaluation.results or {}).get("checks") or []
    outcomes = [c.get("outcome") for c in checks if isinstance(c, dict)]
    for outcome in CheckOutcome.values:
        families["coherence_checks"].add_metric([*labels, outcome], float(outcomes.count(outcome)))
    if evaluation.passed is not None:
        families["coherence_passed"].add_metric(labels, float(evaluation.passed))
    if evaluation.finished_at is not None:
        families["coherence_timestamp_seconds"].add_metric(
            labels, evaluation.finished_at.timestamp()
        )


def _profile_name(evaluation: Evaluation) -> str:
    # The definition frozen into the run names the profile as it was then; the row may be gone.
    frozen = (evaluation.results or {}).get("profile")
    if isinstance(frozen, dict) and isinstance(frozen.get("name"), str):
        return str(frozen["name"])
    return evaluation.profile.name if evaluation.profile is not None else ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
