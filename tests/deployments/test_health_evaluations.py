"""The health verdict weighs the serving revision's latest coherence suite and benchmark: an
incoherent model fails the host, throughput under 90 % of the revision's own baseline degrades
it."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from deployments import services
from deployments.models import Evaluation
from hosts.models import HostHealth
from tests import factories as f

pytestmark = pytest.mark.django_db
UNIT = f.UNIT


@pytest.fixture
def serving(deployment):
    services.change_target_for(deployment=deployment, kind="restart")  # adopt revision 1
    deployment.refresh_from_db()
    parsed = f.parsed_state()
    parsed["deployments"][UNIT]["unit_file_sha256"] = deployment.current_revision.unit_sha256
    f.make_snapshot(deployment.host, parsed=parsed)
    return deployment


def run(deployment, kind, *, minutes_ago, passed=True, phase="after", **results):
    started = timezone.now() - dt.timedelta(minutes=minutes_ago)
    return Evaluation.objects.create(
        deployment=deployment, revision=deployment.current_revision, phase=phase, kind=kind,
        started_at=started, finished_at=started, passed=passed, results=results,
    )  # fmt: skip


def bench(deployment, minutes_ago, tok_s, phase="after"):
    levels = [{"concurrency": 64, "output_tok_s": tok_s, "errors": 0}]
    profile = {"input_tokens": 128, "output_tokens": 256, "prompts": [], "endpoint": "completions"}
    return run(deployment, "benchmark", minutes_ago=minutes_ago, phase=phase, levels=levels,
               profile=profile)  # fmt: skip


def verdict(deployment):
    row = services.host_health_update(host=deployment.host)
    return row.verdict, {r["code"]: r["text"] for r in row.reasons}


def test_a_revision_that_passes_its_suite_and_keeps_its_speed_is_healthy(serving):
    run(serving, "coherence", minutes_ago=5, checks=[{"name": "factual", "outcome": "passed"}])
    bench(serving, 20, 2200.0)  # its baseline
    bench(serving, 5, 2150.0, phase="baseline")
    assert verdict(serving) == ("healthy", {})


def test_a_failing_suite_fails_the_host_naming_the_checks(serving):
    checks = [
        {"name": "factual", "outcome": "failed"},
        {"name": "five-token prompt", "outcome": "failed"},
        {"name": "arithmetic", "outcome": "passed"},
    ]
    run(serving, "coherence", minutes_ago=5, passed=False, checks=checks)
    state, reasons = verdict(serving)
    assert state == "failed"
    assert "failed factual, five-token prompt" in reasons["incoherent"]


def test_only_the_latest_suite_counts(serving):
    run(serving, "coherence", minutes_ago=30, passed=False, checks=[])
    run(serving, "coherence", minutes_ago=5, passed=True, checks=[])
    assert verdict(serving)[0] == "healthy"


def test_a_slow_revision_is_degraded_against_its_own_baseline(serving):
    bench(serving, 60, 2200.0)  # the first passing benchmark after the change: the baseline
    bench(serving, 30, 2300.0)
    bench(serving, 5, 1700.0, phase="baseline")  # measured before the next change
    state, reasons = verdict(serving)
    assert state == "degraded"
    assert "serves 77% of its revision's baseline throughput" in reasons["slow"]


def test_a_benchmark_that_is_its_own_baseline_says_nothing_about_speed(serving):
    bench(serving, 5, 10.0)
    assert verdict(serving)[0] == "healthy"
    assert HostHealth.objects.get(host=serving.host).reasons == []
