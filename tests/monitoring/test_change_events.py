"""Changes on /metrics: each recent change's events as timestamps (the dashboard's annotations)
and the age of each queued or running job (the alerts on a stuck one)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from deployments import lifecycle
from deployments import services as change_services
from deployments.choices import ChangeStatus
from deployments.models import HostLease
from tests import factories as f

pytestmark = pytest.mark.django_db
EVENTS = "controlplane_change_event_timestamp_seconds"
T0 = dt.datetime(2026, 12, 3, 9, 0, tzinfo=dt.UTC)


@pytest.fixture
def catalog():
    return f.make_catalog()


def request(operator, catalog, host_name="gpu-01", port=2201, **kw):
    host = f.make_host(host_name, port=port)
    deployment = f.make_deployment(host, catalog["NVFP4"])
    kind = "model_swap" if "model" in kw else "restart"
    return change_services.change_request_create(
        user=operator, deployment=deployment, kind=kind, snapshot=f.make_snapshot(host),
        reason="INT4 is faster", **kw,
    )  # fmt: skip


def move(change, *targets: str) -> None:
    for target in targets:
        assert lifecycle.change_transition(change=change, source=change.status, target=target)


def test_a_swap_is_requested_started_and_finished_with_its_outcome(operator, catalog, scrape):
    with time_machine.travel(T0, tick=False):
        swap = request(operator, catalog, model=catalog["INT4"])
        move(swap, ChangeStatus.QUEUED)
    with time_machine.travel(T0 + dt.timedelta(minutes=2), tick=False):
        move(swap, ChangeStatus.RUNNING)
    with time_machine.travel(T0 + dt.timedelta(minutes=9), tick=False):
        move(swap, ChangeStatus.ROLLED_BACK)
    with time_machine.travel(T0 + dt.timedelta(minutes=10), tick=False):
        metrics = scrape()

    change = {
        "change": str(swap.pk), "host": "gpu-01", "unit": f.UNIT, "kind": "model_swap",
        "model": "moonshotai/Kimi-K2.5 (INT4)", "from_model": "moonshotai/Kimi-K2.5 (NVFP4)",
    }  # fmt: skip
    assert metrics.value(EVENTS, **change, event="requested", outcome="") == T0.timestamp()
    started = metrics.value(EVENTS, **change, event="started", outcome="")
    assert started == (T0 + dt.timedelta(minutes=2)).timestamp()
    finished = metrics.value(EVENTS, **change, event="finished", outcome="rolled_back")
    assert finished == (T0 + dt.timedelta(minutes=9)).timestamp()
    assert len(metrics.series(EVENTS)) == 3
    assert metrics.series("controlplane_job_running_seconds") == []


def test_a_restart_names_the_model_it_restarts(operator, catalog, scrape):
    restart = request(operator, catalog)
    metrics = scrape()
    [(labels, _)] = metrics.series(EVENTS, change=str(restart.pk))
    assert labels["event"] == "requested" and labels["kind"] == "restart"
    assert labels["model"] == labels["from_model"] == "moonshotai/Kimi-K2.5 (NVFP4)"


def test_changes_leave_after_the_window_but_open_jobs_stay(operator, catalog, settings, scrape):
    settings.METRICS_CHANGE_WINDOW_SECONDS = 3600
    with time_machine.travel(T0, tick=False):
        old = request(operator, catalog)
        move(old, ChangeStatus.RUNNING, ChangeStatus.SUCCEEDED)
        running = request(operator, catalog, host_name="gpu-02", port=2202)
        move(running, ChangeStatus.RUNNING)
        HostLease.objects.create(
            host=running.host, holder=running, fencing_token=1,
            heartbeat_at=T0 + dt.timedelta(minutes=170), expires_at=T0 + dt.timedelta(hours=3),
        )  # fmt: skip
    with time_machine.travel(T0 + dt.timedelta(hours=3), tick=False):
        metrics = scrape()

    assert metrics.value("controlplane_change_events_window_seconds") == 3600
    assert metrics.series(EVENTS, change=str(old.pk)) == []
    # Requested and started three hours ago, still running: in view, whatever the window says.
    assert {ls["event"] for ls, _ in metrics.series(EVENTS, change=str(running.pk))} == {
        "requested",
        "started",
    }
    job = {"change": str(running.pk), "host": "gpu-02", "unit": f.UNIT, "kind": "restart"}
    assert metrics.value("controlplane_job_running_seconds", **job) == 3 * 3600
    assert metrics.value("controlplane_job_heartbeat_age_seconds", **job) == 10 * 60


def test_a_running_job_without_its_lease_has_beaten_since_it_started(operator, catalog, scrape):
    with time_machine.travel(T0, tick=False):
        running = request(operator, catalog)
        move(running, ChangeStatus.RUNNING)
        other = request(operator, catalog, host_name="gpu-02", port=2202)
        # The host's lease row names another job, whose last renewal was an hour earlier.
        earlier = T0 - dt.timedelta(hours=1)
        HostLease.objects.create(
            host=running.host, holder=other, fencing_token=3, heartbeat_at=earlier,
            expires_at=earlier,
        )  # fmt: skip
    with time_machine.travel(T0 + dt.timedelta(minutes=4), tick=False):
        metrics = scrape()
    heartbeat = metrics.series("controlplane_job_heartbeat_age_seconds", change=str(running.pk))
    assert [v for _, v in heartbeat] == [240]


def test_a_queued_job_waits_from_its_approval(operator, approver, catalog, scrape):
    with time_machine.travel(T0, tick=False):
        swap = request(operator, catalog, model=catalog["INT4"])
        restart = request(operator, catalog, host_name="gpu-02", port=2202)
    with time_machine.travel(T0 + dt.timedelta(minutes=20), tick=False):
        change_services.change_request_approve(
            change=swap, approver=approver, snapshot=f.make_snapshot(swap.host), reason="go"
        )
    with time_machine.travel(T0 + dt.timedelta(minutes=30), tick=False):
        metrics = scrape()
    waited = {ls["change"]: v for ls, v in metrics.series("controlplane_job_queued_seconds")}
    assert waited == {str(swap.pk): 600, str(restart.pk): 1800}


def test_the_limit_keeps_the_jobs_an_alert_watches(operator, catalog, settings, scrape):
    settings.METRICS_CHANGE_EVENTS_MAX = 1
    running = request(operator, catalog)
    move(running, ChangeStatus.RUNNING)
    newer = request(operator, catalog, host_name="gpu-02", port=2202)
    move(newer, ChangeStatus.CANCELLED)
    metrics = scrape()
    assert {ls["change"] for ls, _ in metrics.series(EVENTS)} == {str(running.pk)}
    assert len(metrics.series("controlplane_job_running_seconds")) == 1


def test_a_scrape_costs_the_same_queries_for_2_changes_or_12(
    client, metrics_token, operator, catalog
):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {metrics_token}")
        assert response.status_code == 200
        return len(captured.captured_queries)

    def changes(first: int, last: int) -> None:
        for n in range(first, last):
            change = request(operator, catalog, host_name=f"gpu-{n:02d}", port=2201 + n)
            move(change, ChangeStatus.RUNNING)
            HostLease.objects.create(
                host=change.host, holder=change, heartbeat_at=timezone.now(),
                expires_at=timezone.now(),
            )  # fmt: skip
            if n % 2:
                move(change, ChangeStatus.FAILED)

    changes(0, 2)
    few = queries()
    changes(2, 12)
    assert queries() == few
