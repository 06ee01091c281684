"""Rollouts from the console script against a live server, simulated hosts over real SSH and a
real Celery worker: requested by one person, refused to them as its approver, approved by a
second and watched wave by wave to its end; a canary that fails its check, halted and rolled
back; a rollout paused between its waves and resumed."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import Group

from controlplane.cli.exits import ExitCode
from deployments.choices import ChangeStatus
from deployments.models import Rollout, RolloutHost
from deployments.rollouts.choices import RolloutHostStatus, RolloutStatus
from tests.fleet import RegisteredFleet, register
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

UNIT = "vllm-kimi-k25.service"
NVFP4 = "/models/moonshotai/Kimi-K2.5-NVFP4"
INT4 = "/models/moonshotai/Kimi-K2.5-INT4"
SWAP = "model_swap to moonshotai/Kimi-K2.5 (INT4)"


def probed(fleet: RegisteredFleet, cpctl: Any) -> None:
    """Each host's fresh ok snapshot, which the approval binds to."""
    for host in fleet.hosts:
        ran = cpctl("hosts", "probe", host.name, "--wait")
        assert ran.code == 0, ran


def request_swap(cpctl: Any, *args: str) -> Rollout:
    ran = cpctl(
        "rollouts", "create", "model_swap", "--host", "gpu-01", "--host", "gpu-02",
        "--model", "moonshotai/Kimi-K2.5:INT4", *args,
        "--reason", "INT4 serves more tokens per second",
    )  # fmt: skip
    assert ran.code == 0, ran
    rollout = Rollout.objects.get()
    assert ran.out.splitlines() == [
        f"rollout #{rollout.pk} {SWAP}: waiting for a second person's approval",
        "  the canary: gpu-01",
        "  wave 2: gpu-02",
    ], ran
    return rollout


def serving(fleet: RegisteredFleet, name: str) -> str | None:
    return fleet.state(name)["units"][UNIT]["model_path"]


def test_a_swap_over_two_hosts_refused_to_its_requester_approved_and_watched(
    cpctl_as, operator, approver, make_fleet, celery_worker
):
    # The requester may approve others' rollouts: what refuses their own is the rule.
    operator.groups.add(Group.objects.get(name="approver"))
    fleet = register(make_fleet(2))
    as_operator, as_approver = cpctl_as(operator), cpctl_as(approver)
    probed(fleet, as_operator)
    rollout = request_swap(as_operator)
    rollout_id = str(rollout.pk)

    ran = as_operator("rollouts", "approve", rollout_id, "--reason", "mine")
    assert ran.code == ExitCode.AUTH, ran
    assert "the two-person rule: you cannot approve your own rollout [forbidden]" in ran.err
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.PENDING_APPROVAL

    ran = as_approver("rollouts", "approve", rollout_id, "--reason", "the canary will tell")
    assert ran.code == 0, ran
    assert ran.out == f"rollout #{rollout_id} {SWAP}: approved\n", ran

    ran = as_approver("rollouts", "watch", rollout_id, "--interval", "0.3", "--timeout", "180")
    assert ran.code == 0, ran
    lines = ran.out.splitlines()
    hosts = {rh.host.name: rh for rh in RolloutHost.objects.filter(rollout=rollout)}
    canary, second = hosts["gpu-01"].change_id, hosts["gpu-02"].change_id
    # Wave by wave, each host's change named, in the order it happened.
    said = [
        "the canary (wave 1 of 2) started: gpu-01",
        f"  gpu-01: succeeded (change #{canary})",
        "wave 2 of 2 started: gpu-02",
        f"  gpu-02: running (change #{second})",
        f"  gpu-02: succeeded (change #{second})",
    ]
    assert [line for line in lines if line in said] == said, ran
    assert lines[-1] == (
        f"rollout #{rollout_id} {SWAP}: succeeded: 2 hosts changed and checked, 0 skipped"
    ), ran
    for name, rh in hosts.items():
        assert rh.status == RolloutHostStatus.SUCCEEDED, rh
        assert rh.change.status == ChangeStatus.SUCCEEDED and serving(fleet, name) == INT4

    # Its table: each wave's host with its state and change.
    ran = as_operator("rollouts", "show", rollout_id)
    assert ran.code == 0, ran
    assert re.search(rf"^the canary\s+gpu-01\s+{UNIT}\s+succeeded\s+#{canary}\s", ran.out, re.M)
    assert re.search(rf"^wave 2\s+gpu-02\s+{UNIT}\s+succeeded\s+#{second}\s", ran.out, re.M)
    assert re.search(r"^approval\s+approved by anna at .*: the canary will tell", ran.out, re.M)
    # Watching one that has ended answers at once; --json is the rollout's JSON.
    ran = as_operator("rollouts", "watch", rollout_id, "--json")
    assert ran.code == 0 and ran.json()["status"] == "succeeded", ran


def test_a_canary_failing_its_check_halts_rolls_back_and_exits_failed(
    cpctl_as, operator, approver, make_fleet, celery_worker
):
    fleet = register(make_fleet(2))
    fleet.set_fault("gpu-01", "incoherent", models=[INT4])  # the new build answers nonsense
    probed(fleet, cpctl_as(operator))
    rollout = request_swap(cpctl_as(operator))
    ran = cpctl_as(approver)(
        "rollouts", "approve", str(rollout.pk), "--reason", "the canary will tell",
        "--watch", "--interval", "0.3", "--timeout", "180",
    )  # fmt: skip
    assert ran.code == ExitCode.FAILED, ran
    canary = RolloutHost.objects.get(rollout=rollout, host__name="gpu-01")
    # Its own job restored the revision it served when the suite failed: the check, in words.
    assert f"  gpu-01: rolled_back (change #{canary.change_id}): coherence check: " in ran.out, ran
    assert "  not reached: gpu-02" in ran.out, ran
    last = ran.out.splitlines()[-1]
    assert last.startswith(f"rollout #{rollout.pk} {SWAP}: halted: the canary failed a check"), ran
    assert serving(fleet, "gpu-01") == NVFP4 and serving(fleet, "gpu-02") == NVFP4


def test_paused_between_waves_then_resumed_to_success(
    cpctl_as, operator, approver, make_fleet, celery_worker
):
    # Models load in 3 s: the canary's change is still under way when the pause arrives.
    fleet = register(make_fleet(2, load_seconds=3))
    as_operator, as_approver = cpctl_as(operator), cpctl_as(approver)
    probed(fleet, as_operator)
    rollout = request_swap(as_operator)
    rollout_id = str(rollout.pk)
    assert as_approver("rollouts", "approve", rollout_id, "--reason", "go").code == 0
    canary = RolloutHost.objects.get(rollout=rollout, host__name="gpu-01")
    wait_until(
        lambda: RolloutHost.objects.filter(pk=canary.pk, change__isnull=False).exists(),
        timeout=60,
    )

    # Its requester pauses it; without a reason, the server says who did.
    ran = as_operator("rollouts", "pause", rollout_id)
    assert ran.code == 0, ran
    assert ran.out == f"rollout #{rollout_id} {SWAP}: paused: paused by otto\n", ran

    def canary_done() -> bool:
        canary.refresh_from_db()
        return canary.status == RolloutHostStatus.SUCCEEDED

    wait_until(canary_done, timeout=120)
    # The canary's change finished and passed; no other host starts while it is paused.
    ran = as_approver("rollouts", "watch", rollout_id, "--interval", "0.3", "--timeout", "2")
    assert ran.code == ExitCode.UNFINISHED, ran
    assert f"rollout #{rollout_id} is still paused after 2 s" in ran.out, ran
    assert f"  gpu-01: succeeded (change #{canary.change_id})" in ran.out, ran
    assert "wave 2 of 2 started" not in ran.out, ran
    second = RolloutHost.objects.get(rollout=rollout, host__name="gpu-02")
    assert second.status == RolloutHostStatus.PENDING and second.change is None

    ran = as_approver(
        "rollouts", "resume", rollout_id, "--reason", "the canary looks good",
        "--watch", "--interval", "0.3", "--timeout", "180",
    )  # fmt: skip
    assert ran.code == 0, ran
    assert "wave 2 of 2 started: gpu-02" in ran.out, ran
    assert ran.out.splitlines()[-1].startswith(f"rollout #{rollout_id} {SWAP}: succeeded"), ran
    assert serving(fleet, "gpu-02") == INT4
