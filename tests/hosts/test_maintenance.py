"""Maintenance: who may enter and leave it, what it must say, how long it may last, and that
each step (entering, changing, leaving early, the end time passing) is one audit event."""

from __future__ import annotations

import datetime as dt
import re

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone

from controlplane.accounts.models import HostGroup, RoleGrant
from controlplane.accounts.roles import OPERATOR
from controlplane.audit.models import AuditEvent
from deployments.models import ChangeRequest, HostLease
from hosts import services, tasks
from hosts.models import Host
from tests import factories as f

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 5, 9, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


@pytest.fixture
def host(db) -> Host:
    return f.make_host("gpu-01")


def events(action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("seq"))


def enter(host: Host, user: User, *, hours: float = 4, reason: str = "reseating GPU 3"):
    return services.host_maintenance_enter(
        host=host, user=user, reason=reason, until=timezone.now() + hours * HOUR
    )


@time_machine.travel(NOW, tick=False)
def test_entering_stores_who_why_since_and_until_and_is_audited(host, operator) -> None:
    entered = enter(host, operator)
    assert entered.changed is False and entered.running_change is None
    stored = Host.objects.get(pk=host.pk)  # from the row: it outlives every process
    assert stored.in_maintenance(NOW)
    assert (stored.maintenance_reason, stored.maintenance_by) == ("reseating GPU 3", "otto")
    assert (stored.maintenance_since, stored.maintenance_until) == (NOW, NOW + 4 * HOUR)
    (event,) = events("host.maintenance_entered")
    assert (event.actor, event.host_label, event.target_label) == ("otto", "gpu-01", "gpu-01")
    assert event.data == {
        "reason": "reseating GPU 3",
        "since": NOW.isoformat(),
        "until": (NOW + 4 * HOUR).isoformat(),
        "by": "otto",
        "running_change": None,
    }
    # The row's own tracking does not record the same thing a second time.
    assert not AuditEvent.objects.filter(action="host.changed").exists()


@pytest.mark.parametrize("reason", ["", "   ", "\u200b\u200b", "..."])
def test_the_reason_must_be_words(host, operator, reason) -> None:
    with pytest.raises(services.HostRefused, match="reason for maintenance needs visible") as no:
        enter(host, operator, reason=reason)
    assert no.value.code == "invalid" and "reason" in no.value.details["fields"]
    assert not Host.objects.get(pk=host.pk).in_maintenance()
    assert not events("host.maintenance_entered")


@time_machine.travel(NOW, tick=False)
@pytest.mark.parametrize(
    ("until", "words"),
    [
        (NOW, "has passed: give one in the future"),
        (NOW - HOUR, "has passed: give one in the future"),
        (NOW + dt.timedelta(days=30, seconds=1), "at most 30 days (until 2027-01-04 09:00 UTC)"),
        (None, "Give the end time"),
        ("tomorrow", "Give the end time"),
    ],
)
def test_the_end_time_is_in_the_future_and_at_most_30_days_away(
    host, operator, until, words
) -> None:
    with pytest.raises(services.HostRefused, match=re.escape(words)) as no:
        services.host_maintenance_enter(host=host, user=operator, reason="work", until=until)
    assert no.value.http_status == 400 and "until" in no.value.details["fields"]
    assert not events("host.maintenance_entered")


@time_machine.travel(NOW, tick=False)
def test_thirty_days_exactly_is_allowed_and_a_naive_time_is_utc(host, operator) -> None:
    naive = (NOW + dt.timedelta(days=30)).replace(tzinfo=None)
    services.host_maintenance_enter(host=host, user=operator, reason="rack move", until=naive)
    assert Host.objects.get(pk=host.pk).maintenance_until == NOW + dt.timedelta(days=30)


def test_only_an_operator_of_the_host_or_an_administrator_may(
    host, viewer, approver, outsider, admin_user
) -> None:
    for user in (viewer, approver, outsider):
        with pytest.raises(services.HostRefused, match="operator role on it") as no:
            enter(host, user)
        assert no.value.code == "forbidden"
    enter(host, admin_user)
    for user in (viewer, approver, outsider):
        with pytest.raises(services.HostRefused) as no:
            services.host_maintenance_leave(host=host, user=user)
        assert no.value.code == "forbidden"
    services.host_maintenance_leave(host=host, user=admin_user)


def test_an_operator_of_another_host_group_may_not(host) -> None:
    other = f.make_host("gpu-02")
    team_a, team_b = HostGroup.objects.create(name="team-a"), HostGroup.objects.create(name="b")
    team_a.hosts.add(host)
    team_b.hosts.add(other)
    alice = User.objects.create_user("alice")
    RoleGrant.objects.create(user=alice, role=OPERATOR, host_group=team_a)
    enter(host, alice)
    with pytest.raises(services.HostRefused, match="operator role on it"):
        enter(Host.objects.get(pk=other.pk), alice)
    assert Host.objects.get(pk=host.pk).in_maintenance()
    assert not Host.objects.get(pk=other.pk).in_maintenance()


def test_entering_again_changes_reason_and_end_keeps_since_and_says_before_and_after(
    host, operator, admin_user
) -> None:
    with time_machine.travel(NOW, tick=False):
        enter(host, operator)
    with time_machine.travel(NOW + HOUR, tick=False):
        again = enter(host, admin_user, hours=20, reason="GPU 3 replaced; burn-in overnight")
    assert again.changed is True
    stored = Host.objects.get(pk=host.pk)
    assert stored.maintenance_since == NOW  # the maintenance began then
    assert stored.maintenance_until == NOW + 21 * HOUR
    assert stored.maintenance_by == "root-admin"
    (changed,) = events("host.maintenance_changed")
    assert changed.data["before"]["until"] == (NOW + 4 * HOUR).isoformat()
    assert changed.data["after"]["until"] == (NOW + 21 * HOUR).isoformat()
    assert changed.data["after"]["reason"] == "GPU 3 replaced; burn-in overnight"
    assert len(events("host.maintenance_entered")) == 1


def test_leaving_early_is_audited_with_who_and_ends_it(host, operator, admin_user) -> None:
    with time_machine.travel(NOW, tick=False):
        enter(host, operator)
    with time_machine.travel(NOW + HOUR, tick=False):
        services.host_maintenance_leave(host=host, user=admin_user)
        stored = Host.objects.get(pk=host.pk)
        assert not stored.in_maintenance()
        assert (stored.maintenance_until, stored.maintenance_reason) == (None, "")
        with pytest.raises(services.HostRefused, match="gpu-01 is not in maintenance") as no:
            services.host_maintenance_leave(host=host, user=admin_user)
        assert no.value.http_status == 409
    (left,) = events("host.maintenance_left")
    assert left.actor == "root-admin"
    assert left.data["by"] == "otto" and left.data["reason"] == "reseating GPU 3"
    assert left.data["left_at"] == (NOW + HOUR).isoformat()
    assert not events("host.maintenance_ended")


def test_the_end_time_passing_is_one_event_per_host_by_the_system(host, operator) -> None:
    other = f.make_host("gpu-02")
    with time_machine.travel(NOW, tick=False):
        enter(host, operator, hours=1)
        enter(other, operator, hours=3)
    with time_machine.travel(NOW + 30 * dt.timedelta(minutes=1), tick=False):
        assert tasks.end_maintenance() == 0  # nothing has ended yet
    with time_machine.travel(NOW + HOUR, tick=False):
        # At its end time the host is out of maintenance, before any task has noticed.
        assert not Host.objects.get(pk=host.pk).in_maintenance()
        assert tasks.end_maintenance() == 1
        assert tasks.end_maintenance() == 0  # safe to run twice
    with time_machine.travel(NOW + 5 * HOUR, tick=False):
        assert services.hosts_maintenance_expire() == [other.pk]
        assert services.hosts_maintenance_expire() == []
    ended = events("host.maintenance_ended")
    assert [(e.host_label, e.actor) for e in ended] == [
        ("gpu-01", "system:beat"),
        ("gpu-02", "system:beat"),
    ]
    assert ended[0].data["until"] == (NOW + HOUR).isoformat()
    assert ended[0].data["ended_at"] == (NOW + HOUR).isoformat()
    assert all(h.maintenance_until is None for h in Host.objects.all())


def test_entering_after_an_unrecorded_end_records_that_end_first(host, operator) -> None:
    with time_machine.travel(NOW, tick=False):
        enter(host, operator, hours=1)
    with time_machine.travel(NOW + 2 * HOUR, tick=False):  # beat has not run
        entered = enter(host, operator, hours=1, reason="second round")
    assert entered.changed is False
    actions = list(
        AuditEvent.objects.filter(action__startswith="host.maintenance").values_list(
            "action", flat=True
        )
    )
    assert actions == [
        "host.maintenance_entered",
        "host.maintenance_ended",
        "host.maintenance_entered",
    ]
    assert Host.objects.get(pk=host.pk).maintenance_since == NOW + 2 * HOUR


def test_entering_while_a_change_job_runs_is_allowed_and_names_the_job(host, operator) -> None:
    deployment = f.make_deployment(host, f.make_catalog()["NVFP4"])
    change = ChangeRequest.objects.create(
        host=host, deployment=deployment, kind="restart", snapshot=f.make_snapshot(host),
        reason="r", requested_by_name="otto", needs_approval=False, params_digest="-",
        correlation_id="c", status="running", started_at=timezone.now(),
    )  # fmt: skip
    HostLease.objects.create(
        host=host, holder=change, fencing_token=1, expires_at=timezone.now() + HOUR
    )
    entered = enter(host, operator)
    assert entered.running_change == change.pk
    (event,) = events("host.maintenance_entered")
    assert event.data["running_change"] == change.pk
    assert ChangeRequest.objects.get(pk=change.pk).status == "running"  # left alone


@pytest.mark.integration
def test_scheduled_probes_go_on_in_maintenance(registered_fleet, operator) -> None:
    """Beat's sweep claims a host in maintenance like any other, and its batch probes it over
    SSH: the picture stays true while someone works on the host."""
    gpu1, gpu2 = registered_fleet.hosts
    enter(gpu1, operator)
    claimed = [pk for pk, _ in services.hosts_claim_due_ids()]
    assert set(claimed) == {gpu1.pk, gpu2.pk}
    assert tasks.probe_batch(claimed) == 2
    for host in (gpu1, gpu2):
        (snapshot,) = host.snapshots.all()
        assert (snapshot.trigger, snapshot.status) == ("schedule", "ok")
    assert Host.objects.get(pk=gpu1.pk).in_maintenance()
