"""cpctl against a live server, simulated hosts over real SSH and a real Celery worker: the
fleet, a probe, a journal, and a change requested, approved by a second person and watched to
its end, each from the console script."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group

from controlplane.audit.models import AuditEvent
from controlplane.cli.exits import ExitCode
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest
from hosts.models import Host
from tests import factories as f
from tests.fleet import register

pytestmark = pytest.mark.integration

INT4 = "/models/moonshotai/Kimi-K2.5-INT4"


def probe(host: Host) -> None:
    """A fresh ok snapshot, taken in the test through the service the worker runs."""
    from hosts import services

    snapshot = services.host_probe(host=Host.objects.get(pk=host.pk), trigger="manual")
    assert snapshot.status == "ok", snapshot.error


def test_the_fleet_a_probe_a_snapshot_and_a_journal(cpctl_as, operator, make_fleet, tmp_path):
    register(make_fleet(2))
    cpctl = cpctl_as(operator)

    ran = cpctl("hosts", "list")
    assert ran.code == 0, ran
    assert "gpu-01" in ran.out and "gpu-02" in ran.out and "never probed" in ran.out
    assert [h["name"] for h in cpctl("hosts", "list", "--json").json()] == ["gpu-01", "gpu-02"]

    ran = cpctl("hosts", "probe", "gpu-01", "--wait")
    assert ran.code == 0, ran
    assert re.search(r"^status\s+ok$", ran.out, re.M) and "vllm-kimi-k25.service" in ran.out
    first = cpctl("snapshots", "show", "gpu-01", "--json").json()
    assert first["status"] == "ok" and first["host"] == "gpu-01"

    ran = cpctl("hosts", "show", "gpu-01")
    assert ran.code == 0, ran
    assert f"#{first['id']} ok" in ran.out and "Kimi-K2.5 (NVFP4)" in ran.out

    # Two snapshots of an unchanged host: no material difference; a changed PID is drift.
    second = cpctl("hosts", "probe", "gpu-01", "--wait", "--json").json()
    ran = cpctl("snapshots", "diff", str(first["id"]), str(second["id"]))
    assert ran.code == 0, ran
    assert "no material difference" in ran.out
    changed = f.make_snapshot(Host.objects.get(name="gpu-01"), parsed=f.parsed_state(main_pid=777))
    ran = cpctl("snapshots", "diff", str(first["id"]), str(changed.pk))
    assert ran.code == ExitCode.DRIFT, ran
    assert "main_pid" in ran.out and "777" in ran.out
    diff = cpctl("snapshots", "diff", str(first["id"]), str(changed.pk), "--json")
    assert diff.code == ExitCode.DRIFT
    assert any(d["after"] == 777 for d in diff.json()["differences"]), diff

    ran = cpctl("hosts", "journal", "gpu-01", "--lines", "5")
    assert ran.code == 0, ran
    assert ran.out.strip(), ran
    assert AuditEvent.objects.filter(action="host.journal_read", actor=operator.username).exists()
    # Every request said it came from cpctl (the audit log keeps the user agent).
    event = AuditEvent.objects.filter(action="host.journal_read").latest("seq")
    assert event.user_agent.startswith("cpctl/")

    # The same server and token from a config file only its owner can read.
    config = tmp_path / "home" / ".config" / "cpctl" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'url = "{cpctl.env["CPCTL_URL"]}"\ntoken = "{cpctl.env["CPCTL_TOKEN"]}"\n')
    config.chmod(0o600)
    from_file = cpctl.without("CPCTL_URL", "CPCTL_TOKEN")
    assert from_file("hosts", "list").code == 0
    ran = from_file("config")
    assert ran.code == 0 and str(config) in ran.out, ran
    assert cpctl.env["CPCTL_TOKEN"] not in ran.out + ran.err


def test_a_restart_requested_approved_and_watched_from_the_cli(
    cpctl_as, operator, approver, make_fleet, celery_worker, settings
):
    # Restarts need a second person here, so the whole two-person path runs on the quickest kind.
    settings.APPROVAL_REQUIRED_KINDS = ["model_swap", "engine_repair", "restart"]
    # The requester may approve others' changes: what refuses its own is the rule, not a role.
    operator.groups.add(Group.objects.get(name="approver"))
    fleet = register(make_fleet(1))
    probe(fleet.host("gpu-01"))
    as_operator, as_approver = cpctl_as(operator), cpctl_as(approver)

    ran = as_operator(
        "changes", "request", "restart", "--host", "gpu-01", "--snapshot", "latest",
        "--reason", "pick up the patched kernel", "--json",
    )  # fmt: skip
    assert ran.code == 0, ran
    requested = ran.json()
    assert requested["status"] == "pending_approval" and requested["needs_approval"] is True
    change_id = str(requested["id"])

    ran = as_operator("changes", "approve", change_id, "--snapshot", "latest", "--reason", "me")
    assert ran.code == ExitCode.AUTH, ran
    assert "two-person rule" in ran.err

    ran = as_approver("changes", "approve", change_id, "--snapshot", "latest",
                      "--reason", "the host is idle")  # fmt: skip
    assert ran.code == 0, ran
    assert f"change #{change_id} restart on gpu-01: queued" in ran.out

    ran = as_approver("changes", "watch", change_id, "--interval", "0.3", "--timeout", "120")
    assert ran.code == 0, ran
    last = ran.out.rstrip().splitlines()[-1]
    assert last.startswith(f"change #{change_id} restart on gpu-01: succeeded"), ran
    change = ChangeRequest.objects.get(pk=change_id)
    assert change.status == ChangeStatus.SUCCEEDED
    for step in change.steps.all():
        assert f"step {step.seq:>2} {step.name}: {step.status}" in ran.out, ran

    # A probe queued for the worker answers at once with where its snapshot will be.
    queued = as_approver("hosts", "probe", "gpu-01", "--json")
    assert queued.code == 0 and queued.json()["host"] == "gpu-01", queued

    # Watching a change that has ended answers at once, and --json is the change's JSON.
    ran = as_operator("changes", "watch", change_id, "--json")
    assert ran.code == 0, ran
    assert ran.json()["status"] == "succeeded" and ran.json()["steps"]


def test_a_swap_that_crashes_on_start_is_rolled_back_and_exits_8(
    cpctl_as, operator, approver, make_fleet, celery_worker
):
    fleet = register(make_fleet(1))
    fleet.set_fault("gpu-01", "crash_on_start", models=[INT4])
    probe(fleet.host("gpu-01"))
    ran = cpctl_as(operator)(
        "changes", "request", "model_swap", "--host", "gpu-01",
        "--model", "moonshotai/Kimi-K2.5:INT4", "--snapshot", "latest",
        "--reason", "INT4 serves more tokens per second", "--json",
    )  # fmt: skip
    assert ran.code == 0, ran
    change_id = str(ran.json()["id"])
    ran = cpctl_as(approver)(
        "changes", "approve", change_id, "--snapshot", "new", "--reason", "fits",
        "--watch", "--interval", "0.3", "--timeout", "120",
    )  # fmt: skip
    assert ran.code == ExitCode.FAILED, ran
    assert "rolled_back" in ran.out and ": failed" in ran.out, ran
    assert ChangeRequest.objects.get(pk=change_id).status == ChangeStatus.ROLLED_BACK
