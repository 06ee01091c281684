"""A real Prometheus (Debian's package) scrapes a live control plane's /metrics with
METRICS_TOKEN and loads the shipped rules: the series, the change annotations' query and the
alerts are what Prometheus itself answers."""

from __future__ import annotations

import datetime as dt
import json
import urllib.parse

import pytest
from django.utils import timezone

from controlplane.audit.models import AuditEvent, AuditVerification
from controlplane.monitoring.annotations import EVENT_SOURCES, annotation_expr
from deployments import lifecycle
from deployments import services as change_services
from deployments.choices import ChangeStatus
from deployments.models import Deployment, Evaluation, Rollout
from deployments.rollouts import requests
from deployments.rollouts.choices import RolloutStatus
from tests import factories as f
from tests.deployments.rollouts.conftest import approved, end_change, fresh, take_turns
from tests.revision_history import make_week_history
from tests.waiting import wait_until

from .prometheus import ALERTS, prometheus_scraping
from .test_dashboard import DASHBOARD, queries

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def fleet_with_history(operator) -> dict:
    week = make_week_history(f.make_host("gpu-01"), operator)
    f.make_snapshot(week.host)
    gpu02 = f.make_host("gpu-02", port=2202)
    deployment = f.make_deployment(gpu02, week.model)
    restart = change_services.change_request_create(
        user=operator, deployment=deployment, kind="restart", snapshot=f.make_snapshot(gpu02),
        reason="patch",
    )  # fmt: skip
    for target in (ChangeStatus.RUNNING, ChangeStatus.SUCCEEDED):
        lifecycle.change_transition(change=restart, source=restart.status, target=target)
    restart.refresh_from_db()
    started = timezone.now() - dt.timedelta(hours=2)
    AuditVerification.objects.create(
        started_at=started, ok=False, events=12, head_seq=12, broken_seq=7, trigger="beat",
        head_hash="a" * 64, checkpoints=1, duration_ms=1500,
    )  # fmt: skip
    # The week's benchmarks predate per-chunk ITL; a run since measures it.
    week_bench = Evaluation.objects.filter(revision=week.current_revision, kind="benchmark").first()
    levels = [{**lv, "schema": 2, "itl_ms": lv["itl_ms"]} for lv in week_bench.results["levels"]]
    bench = Evaluation.objects.create(
        deployment=week, revision=week.current_revision, phase="on_demand", kind="benchmark",
        profile=week_bench.profile, started_at=timezone.now(), finished_at=timezone.now(),
        passed=True, results={**week_bench.results, "levels": levels},
    )  # fmt: skip
    return {"restart": restart, "bench": bench}


def test_prometheus_scrapes_metrics_and_loads_the_rules(live_server, operator, metrics_token):
    made = fleet_with_history(operator)
    target = urllib.parse.urlsplit(live_server.url).netloc

    with prometheus_scraping(target=target, token=metrics_token, wrong_token="nope") as prom:

        def targets() -> dict:
            active = prom.api("targets")["activeTargets"]
            return {t["labels"]["job"]: t for t in active if t["health"] != "unknown"}

        def scraped() -> dict:
            seen = targets()
            ok = seen.get("gpu-controlplane", {}).get("health") == "up"
            return seen if ok and "wrong-token" in seen else {}

        # The same endpoint refuses a scraper with the wrong token.
        refused = wait_until(scraped, explain=prom.explain)["wrong-token"]
        assert refused["health"] == "down" and "401" in refused["lastError"], refused
        at = prom.scraped_at()

        up = prom.query('controlplane_host_up{job="gpu-controlplane"}', at)
        assert {r["metric"]["host"]: r["value"][1] for r in up} == {"gpu-01": "1", "gpu-02": "1"}
        level = {lv["concurrency"]: lv for lv in made["bench"].levels}[64]
        [tok_s] = prom.query(
            'controlplane_benchmark_output_tokens_per_second{role="current", concurrency="64"}', at
        )
        assert tok_s["metric"]["host"] == "gpu-01" and tok_s["metric"]["revision"] == "4"
        assert float(tok_s["value"][1]) == level["output_tok_s"]

        # The dashboard's annotation query, as Grafana sends it for every host: each event of
        # the restart at its own time, in milliseconds.
        restart = made["restart"]
        changes = annotation_expr(EVENT_SOURCES[0]).replace("$host", ".*")
        events = {
            r["metric"]["event"]: float(r["value"][1])
            for r in prom.query(changes, at)
            if r["metric"]["change"] == str(restart.pk)
        }
        assert events == {
            "requested": pytest.approx(restart.created_at.timestamp() * 1000),
            "started": pytest.approx(restart.started_at.timestamp() * 1000),
            "finished": pytest.approx(restart.finished_at.timestamp() * 1000),
        }

        def evaluated_rules() -> list[dict]:
            loaded = [r for g in prom.api("rules")["groups"] for r in g["rules"]]
            done = all(r["lastEvaluation"] > "2000" for r in loaded)
            return loaded if loaded and done else []

        loaded = wait_until(evaluated_rules, explain=prom.explain)
        assert len(loaded) == ALERTS.read_text().count("- alert: ")
        assert all(r["health"] == "ok" for r in loaded), [r for r in loaded if r["health"] != "ok"]

        def firing() -> set[str]:
            return {
                a["labels"]["alertname"]
                for a in prom.api("alerts")["alerts"]
                if a["state"] == "firing"
            }

        # The chain's newest verification found a break and that alert has no `for:`.
        assert "AuditChainBroken" in wait_until(
            lambda: "AuditChainBroken" in firing() and firing(), explain=prom.explain
        )
        assert "HostKeyChanged" not in firing()


def halted_rollout(operator, approver) -> Rollout:
    """A restart rollout of gpu-03 whose canary failed its coherence suite: halted. Its tasks
    go to the test's private queue (the rollout is committed: this test is transactional)."""
    gpu03 = f.make_host("gpu-03", port=2203)
    f.make_deployment(gpu03, Deployment.objects.get(host__name="gpu-02").model)
    fresh(gpu03)
    rollout = requests.rollout_create(
        user=operator, kind="restart", hosts=[gpu03], reason="pick up the patched kernel",
        wave_size=1, max_down=1,
    )  # fmt: skip
    approved(rollout, approver)
    [canary] = take_turns(rollout)
    assert canary.change is not None, canary.skip_reason
    end_change(canary.change, coherent=False)
    take_turns(rollout)
    rollout.refresh_from_db()
    assert rollout.status in (RolloutStatus.HALTING, RolloutStatus.HALTED), rollout.status
    return rollout


def test_every_dashboard_query_runs_on_prometheus(
    live_server, operator, approver, metrics_token, private_queue
):
    fleet_with_history(operator)
    rollout = halted_rollout(operator, approver)
    target = urllib.parse.urlsplit(live_server.url).netloc
    dashboard = json.loads(DASHBOARD.read_text())
    with prometheus_scraping(target=target, token=metrics_token) as prom:
        # Two scrapes at least, so that increase() over the job outcomes has a value.
        at = prom.scraped_at(scrapes=2)
        answered = {}
        for expr in queries(dashboard):
            # What Grafana sends with "All" hosts selected; a query Prometheus cannot parse
            # fails the request (Prometheus.api asserts success).
            answered[expr] = prom.query(expr.replace("$host", ".*"), at)
    empty = [expr for expr, result in answered.items() if not result]
    # The rollout annotation's query, as Grafana sends it: the halt at its own time.
    [drawn] = [result for expr, result in answered.items() if "rollout_event" in expr]
    halted = AuditEvent.objects.get(action="rollout.halted", target_id=str(rollout.pk))
    assert {
        r["metric"]["event"]: float(r["value"][1])
        for r in drawn
        if r["metric"]["event"] == "halted"
    } == {"halted": pytest.approx(halted.created_at.timestamp() * 1000)}
    # With GPUs, a benchmark, a suite and a change scraped, only the panels of what this
    # fleet has not got (a running or queued job) are empty.
    assert all("controlplane_job_" in expr for expr in empty), empty
