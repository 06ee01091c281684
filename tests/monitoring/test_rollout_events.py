"""Rollouts on /metrics: each recent rollout's events as timestamps (the dashboard's rollout
annotations), rollouts by status and those waiting for approval, bounded by a window and a
maximum, and scoped as the rollouts page is."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.accounts.models import HostGroup
from deployments.rollouts import decisions, requests
from deployments.rollouts.choices import RolloutStatus
from tests import factories as f
from tests.deployments.rollouts.conftest import (
    approved,
    end_change,
    fresh,
    swap_rollout,
    take_turns,
)

from .conftest import parse

pytestmark = pytest.mark.django_db
EVENTS = "controlplane_rollout_event_timestamp_seconds"
T0 = dt.datetime(2026, 12, 3, 9, 0, tzinfo=dt.UTC)
INT4 = "moonshotai/Kimi-K2.5 (INT4)"


@pytest.fixture
def catalog(db):
    return f.make_catalog()


@pytest.fixture
def fleet(catalog):
    deployments = []
    for i in (1, 2, 3):
        host = f.make_host(f"gpu-0{i}", port=2200 + i)
        deployments.append(f.make_deployment(host, catalog["NVFP4"]))
        fresh(host)
    return deployments


def at(minutes: float):
    return time_machine.travel(T0 + dt.timedelta(minutes=minutes), tick=False)


def stamp(minutes: float) -> float:
    return (T0 + dt.timedelta(minutes=minutes)).timestamp()


def events(metrics, rollout) -> dict[tuple[str, str, str], float]:
    """(event, status, wave) -> time, of one rollout."""
    return {
        (ls["event"], ls["status"], ls["wave"]): v
        for ls, v in metrics.series(EVENTS, rollout=str(rollout.pk))
    }


def test_a_rollout_that_succeeds_is_drawn_at_each_step(
    operator, approver, fleet, catalog, scrape
) -> None:
    with at(0):
        rollout = swap_rollout(operator, fleet, catalog["INT4"])
    with at(1):
        approved(rollout, approver)
    with at(2):
        [canary] = take_turns(rollout)  # started, and the canary's wave with it
    with at(5):
        end_change(canary.change)
    with at(6):
        wave = take_turns(rollout)  # the canary passes, wave 2 starts
    with at(9):
        for rh in wave:
            end_change(rh.change)
    with at(10):
        take_turns(rollout)  # wave 2 passes: succeeded
    with at(11):
        metrics = scrape()

    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.SUCCEEDED
    assert events(metrics, rollout) == {
        ("requested", "pending_approval", ""): stamp(0),
        ("approved", "approved", ""): stamp(1),
        ("wave_started", "running", "the canary"): stamp(2),
        ("wave_passed", "running", "the canary"): stamp(6),
        ("wave_started", "running", "wave 2"): stamp(6),
        ("wave_passed", "running", "wave 2"): stamp(10),
        ("ended", "succeeded", ""): stamp(10),
    }
    [(labels, _), *_] = metrics.series(EVENTS, rollout=str(rollout.pk))
    assert labels["kind"] == "model_swap" and labels["model"] == INT4
    assert labels["host_group"] == ""  # a selection of hosts, not a group
    assert metrics.value("controlplane_rollouts", status="succeeded") == 1
    assert metrics.value("controlplane_rollouts", status="halted") == 0  # present from zero
    assert metrics.value("controlplane_rollouts_waiting_approval") == 0


def test_a_halted_rollout_says_where_it_halted_and_that_it_rolled_back(
    operator, approver, fleet, catalog, scrape
) -> None:
    group = HostGroup.objects.create(name="prod")
    group.hosts.add(*(d.host for d in fleet))
    with at(0):
        rollout = requests.rollout_create(
            user=operator, kind="model_swap", model=catalog["INT4"], host_group=group,
            reason="INT4 serves more tokens", wave_size=2, max_down=2,
        )  # fmt: skip
        approved(rollout, approver)
        [canary] = take_turns(rollout)
    with at(4):
        end_change(canary.change, coherent=False)
    with at(5):
        take_turns(rollout)  # the canary failed its suite: halted, its rollback requested
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.HALTING, rollout.status_reason
    with at(6):
        halting = scrape()
    [back] = [rh for rh in rollout.hosts.all() if rh.rollback_change_id]
    with at(8):
        end_change(back.rollback_change)
    with at(9):
        take_turns(rollout)
    with at(10):
        metrics = scrape()

    assert events(halting, rollout)[("halted", "halting", "the canary")] == stamp(5)
    assert halting.value("controlplane_rollouts", status="halting") == 1
    drawn = events(metrics, rollout)
    assert drawn[("halted", "halting", "the canary")] == stamp(5)
    assert drawn[("rolled_back", "halted", "the canary")] == stamp(9)
    assert drawn[("ended", "halted", "")] == stamp(9)
    assert {ls["host_group"] for ls, _ in metrics.series(EVENTS, rollout=str(rollout.pk))} == {
        "prod"
    }
    assert metrics.value("controlplane_rollouts", status="halted") == 1


def test_rollouts_leave_after_the_window_but_those_still_going_stay(
    operator, approver, fleet, catalog, settings, scrape
) -> None:
    settings.METRICS_CHANGE_WINDOW_SECONDS = 3600
    with at(0):
        old = swap_rollout(operator, fleet[:1], catalog["INT4"])
        decisions.rollout_reject(rollout=old, approver=approver, reason="not this week")
        going = approved(swap_rollout(operator, fleet[1:], catalog["INT4"]), approver)
        take_turns(going)
    with at(180):
        metrics = scrape()
    assert metrics.series(EVENTS, rollout=str(old.pk)) == []
    # Requested three hours ago, its canary still changing: in view, whatever the window says.
    assert set(events(metrics, going)) == {
        ("requested", "pending_approval", ""),
        ("approved", "approved", ""),
        ("wave_started", "running", "the canary"),
    }
    assert metrics.value("controlplane_rollouts", status="rejected") == 1


def test_the_limit_keeps_the_rollouts_still_going(
    operator, approver, fleet, catalog, settings, scrape
) -> None:
    settings.METRICS_ROLLOUT_EVENTS_MAX = 1
    going = approved(swap_rollout(operator, fleet[:1], catalog["INT4"]), approver)
    take_turns(going)
    newer = swap_rollout(operator, fleet[1:], catalog["INT4"])
    metrics = scrape()
    assert {ls["rollout"] for ls, _ in metrics.series(EVENTS)} == {str(going.pk)}
    # The counts are of every rollout, whatever the limit.
    assert metrics.value("controlplane_rollouts_waiting_approval") == 1
    assert newer.status == RolloutStatus.PENDING_APPROVAL


def test_a_person_sees_the_rollouts_over_hosts_they_all_see_and_the_scraper_all(
    client, teams, scoped, operator, scrape
) -> None:
    for name in teams.hosts:
        fresh(teams.hosts[name])
    team_a = swap_rollout(
        operator, [teams.deployments["gpu-02"], teams.deployments["gpu-03"]],
        teams.catalog["INT4"],
    )  # fmt: skip
    prod = swap_rollout(operator, [teams.deployments["gpu-01"]], teams.catalog["INT4"])
    everything = scrape()
    assert {ls["rollout"] for ls, _ in everything.series(EVENTS)} == {
        str(team_a.pk), str(prod.pk)
    }  # fmt: skip
    assert everything.value("controlplane_rollouts_waiting_approval") == 2
    client.force_login(scoped("ann", "viewer", "team-a"))
    response = client.get("/metrics")
    assert response.status_code == 200
    mine = parse(response.content.decode())
    # The prod rollout names gpu-01, which ann does not see: not even counted.
    assert {ls["rollout"] for ls, _ in mine.series(EVENTS)} == {str(team_a.pk)}
    assert mine.value("controlplane_rollouts_waiting_approval") == 1
    assert mine.value("controlplane_rollouts", status="pending_approval") == 1
    # pat sees gpu-02 but not gpu-03: the team-a rollout is not theirs to see.
    client.force_login(scoped("pat", "viewer", "prod"))
    theirs = parse(client.get("/metrics").content.decode())
    assert {ls["rollout"] for ls, _ in theirs.series(EVENTS)} == {str(prod.pk)}


def test_a_scrape_costs_the_same_queries_for_1_rollout_or_4(
    client, metrics_token, operator, approver, catalog
) -> None:
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {metrics_token}")
        assert response.status_code == 200
        return len(captured.captured_queries)

    def rollouts(first: int, last: int) -> None:
        for n in range(first, last):
            host = f.make_host(f"gpu-{n:02d}", port=2201 + n)
            fresh(host)
            rollout = approved(
                swap_rollout(operator, [f.make_deployment(host, catalog["NVFP4"])],
                             catalog["INT4"]),
                approver,
            )  # fmt: skip
            take_turns(rollout)

    rollouts(0, 1)
    few = queries()
    rollouts(1, 4)
    assert queries() == few
