"""cpctl hosts maintenance against a live server: show, start (until a time or for a while),
change, end; the operator role on the host is needed, and ending twice is a refusal."""

from __future__ import annotations

import datetime as dt

import pytest

from controlplane.audit.models import AuditEvent
from controlplane.cli.exits import ExitCode
from hosts.models import Host
from tests import factories as f

pytestmark = pytest.mark.integration


def test_an_operator_starts_changes_and_ends_a_maintenance(cpctl_as, operator, viewer):
    f.make_host("gpu-01")
    cpctl = cpctl_as(operator)

    ran = cpctl("hosts", "maintenance", "show", "gpu-01")
    assert ran.code == 0, ran
    assert ran.out.strip() == "gpu-01: not in maintenance"

    ran = cpctl("hosts", "maintenance", "start", "gpu-01", "--reason", "reseat GPU 3",
                "--for", "2h")  # fmt: skip
    assert ran.code == 0, ran
    assert "gpu-01: in maintenance until" in ran.out and "reseat GPU 3" in ran.out
    host = Host.objects.get(name="gpu-01")
    assert host.in_maintenance() and host.maintenance_reason == "reseat GPU 3"
    left = host.maintenance_until - dt.datetime.now(dt.UTC)
    assert dt.timedelta(minutes=118) < left <= dt.timedelta(hours=2)

    until = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=5)).strftime("%Y-%m-%d %H:%M:%S")
    ran = cpctl("hosts", "maintenance", "start", "gpu-01", "--reason", "and swap its PSU",
                "--until", until)  # fmt: skip
    assert ran.code == 0, ran
    assert "reason and end time are changed" in ran.out
    shown = cpctl("hosts", "maintenance", "show", "gpu-01", "--json").json()
    assert shown["in_maintenance"] and shown["reason"] == "and swap its PSU"
    assert shown["until"].startswith(until.replace(" ", "T"))  # a time without a zone is UTC

    # A viewer may look but not act; nothing changes.
    watcher = cpctl_as(viewer)
    assert watcher("hosts", "maintenance", "show", "gpu-01").code == 0
    ran = watcher("hosts", "maintenance", "end", "gpu-01")
    assert ran.code == ExitCode.AUTH, ran
    assert Host.objects.get(name="gpu-01").in_maintenance()

    ran = cpctl("hosts", "maintenance", "end", "gpu-01")
    assert ran.code == 0, ran
    assert ran.out.strip() == "gpu-01: not in maintenance"
    assert not Host.objects.get(name="gpu-01").in_maintenance()
    ran = cpctl("hosts", "maintenance", "end", "gpu-01")
    assert ran.code == ExitCode.REFUSED, ran
    actions = AuditEvent.objects.filter(host_label="gpu-01", action__startswith="host.maint")
    assert list(actions.order_by("seq").values_list("action", flat=True)) == [
        "host.maintenance_entered", "host.maintenance_changed", "host.maintenance_left",
    ]  # fmt: skip


def test_bad_input_is_refused_before_anything_is_sent(cpctl_as, operator):
    f.make_host("gpu-01")
    cpctl = cpctl_as(operator)
    for args in (
        ("--reason", "x"),  # no end
        ("--reason", "x", "--for", "2h", "--until", "2030-01-01"),  # two ends
        ("--reason", "x", "--for", "two hours"),
    ):
        ran = cpctl("hosts", "maintenance", "start", "gpu-01", *args)
        assert ran.code == ExitCode.USAGE, ran
    ran = cpctl("hosts", "maintenance", "start", "gpu-01", "--reason", "x",
                "--until", "2020-01-01")  # fmt: skip
    assert ran.code == ExitCode.REFUSED, ran
    assert "future" in (ran.out + ran.err)
    assert not Host.objects.get(name="gpu-01").in_maintenance()
