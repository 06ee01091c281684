"""Rollouts whose jobs run in this process against simulated hosts over real SSH (as
tests/deployments/test_drain_jobs.py runs single changes): each look a worker would take
(orchestrator.rollout_advance, which probes the hosts whose turn it is), then each change it
queued, until the rollout ends. The test sees exactly what reached each host and when."""

from __future__ import annotations

from typing import Any

import pytest

from deployments import services
from deployments.choices import ChangeKind, ChangeStatus, DrainState
from deployments.execution import runner
from deployments.models import (
    ChangeRequest,
    Deployment,
    DeploymentRevision,
    DrainHook,
    ModelArtifact,
    Rollout,
    RolloutHost,
)
from deployments.rollouts import decisions, orchestrator, requests
from deployments.rollouts.choices import FINAL_ROLLOUT_STATUSES, RolloutHostStatus, RolloutStatus
from hosts import services as host_services
from hosts.models import Host
from tests.fleet import RegisteredFleet, register

pytestmark = pytest.mark.integration
H = RolloutHostStatus
UNIT = "vllm-kimi-k25.service"
INT4 = "/models/moonshotai/Kimi-K2.5-INT4"
NVFP4 = "/models/moonshotai/Kimi-K2.5-NVFP4"


def probe(host: Host) -> Any:
    snapshot = host_services.host_probe(
        host=Host.objects.select_related("credential").get(pk=host.pk), trigger="manual"
    )
    assert snapshot.status == "ok", snapshot.error
    return snapshot


def rollout_of(fleet: RegisteredFleet, operator: Any, approver: Any, **kwargs: Any) -> Rollout:
    for host in fleet.hosts:
        probe(host)
    rollout = requests.rollout_create(user=operator, hosts=list(fleet.hosts), **kwargs)
    decisions.rollout_approve(rollout=rollout, approver=approver, reason="the canary will tell")
    return rollout


def drive(rollout: Rollout, looks: int = 30) -> Rollout:
    """What the workers would do, one step at a time: look at the rollout, run what it queued."""
    for _ in range(looks):
        orchestrator.rollout_advance(rollout_id=rollout.pk)
        queued = ChangeRequest.objects.filter(status=ChangeStatus.QUEUED).order_by("pk")
        for change in queued:
            runner.change_execute(change_id=change.pk)
        rollout.refresh_from_db()
        if rollout.status in FINAL_ROLLOUT_STATUSES and not queued.exists():
            return rollout
    raise AssertionError(f"rollout #{rollout.pk} is still {rollout.status}")


def rows(rollout: Rollout) -> dict[str, RolloutHost]:
    found = RolloutHost.objects.filter(rollout=rollout).select_related(
        "host", "change", "rollback_change", "approved_revision"
    )
    return {rh.host.name: rh for rh in found}


def unit_file(fleet: RegisteredFleet, name: str) -> str:
    return fleet.run(name, f"cat /etc/systemd/system/{UNIT}")[0]


def test_a_drained_rollout_takes_each_busy_host_out_of_rotation_before_restarting_it(
    make_fleet, db, operator, approver
) -> None:
    fleet = register(make_fleet(2))
    for name in ("gpu-01", "gpu-02"):
        fleet.set_inflight(name, 4, 1)
    fleet.set_request_seconds(40)  # two real seconds at the tests' time scale
    rollout = rollout_of(
        fleet, operator, approver, kind=ChangeKind.RESTART, reason="pick up the patched kernel",
        wave_size=1, max_down=1, drain_hook=DrainHook.objects.get(name="sim-lb"),
        drain_deadline_seconds=120,
    )  # fmt: skip
    for name in ("gpu-01", "gpu-02"):
        fleet.clear_command_log(name)

    rollout = drive(rollout)

    assert rollout.status == RolloutStatus.SUCCEEDED, (rollout.status_reason, rows(rollout))
    for name, rh in rows(rollout).items():
        change = rh.change
        assert rh.status == H.SUCCEEDED and change.status == ChangeStatus.SUCCEEDED
        assert change.params["drain"]["hook_name"] == "sim-lb"
        names = [s.name for s in change.steps.all()]
        drain = names.index("drain: take the host out of rotation (sim-lb)")
        wait = names.index("wait for requests in flight to reach 0 (up to 120 s)")
        assert drain < wait < names.index("systemctl restart")
        assert names[-1] == "undrain: put the host back (sim-lb)"
        readings = change.steps.get(seq=wait + 1).output.splitlines()
        assert readings[0].endswith("5 in flight (4 running, 1 waiting)")
        assert readings[-1].endswith("0 in flight (0 running, 0 waiting)")
        log = fleet.command_log(name)
        out, restart, back = (
            next(i for i, line in enumerate(log) if word in line)
            for word in (f"lb-drain out --backend {name}", "systemctl restart", "lb-drain in")
        )
        assert out < restart < back, name
        assert fleet.in_rotation(name) and change.drain_state == DrainState.UNDRAINED


def test_a_halted_wave_goes_back_to_the_revision_each_host_was_approved_on(
    make_fleet, db, operator, approver
) -> None:
    fleet = register(make_fleet(3))
    # gpu-02 went forward twice (max-num-seqs 64, then 32) and back to its first revision by
    # hand: the revision numbered just before the one the rollout will write is not the one it
    # serves.
    gpu02 = Deployment.objects.get(host__name="gpu-02")
    for extra in (["--max-num-seqs", "64"], ["--max-num-seqs", "32"]):
        by_hand(gpu02, operator, approver, kind=ChangeKind.REDEPLOY, extra_args=extra)
    first = gpu02.revisions.get(number=1)
    by_hand(gpu02, operator, approver, kind=ChangeKind.ROLLBACK, revision=first)
    gpu02.refresh_from_db()
    assert gpu02.current_revision == first
    assert unit_file(fleet, "gpu-02") == first.unit_text
    fleet.set_fault("gpu-03", "incoherent", models=[INT4])  # wave 2 fails on gpu-03

    int4 = ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant="INT4")
    rollout = rollout_of(
        fleet, operator, approver, kind=ChangeKind.MODEL_SWAP, model=int4,
        reason="INT4 serves more tokens per second", wave_size=2, max_down=2,
    )  # fmt: skip
    rollout = drive(rollout)

    assert rollout.status == RolloutStatus.HALTED, rollout.status_reason
    rh = rows(rollout)["gpu-02"]
    assert rh.approved_revision == first
    swapped = rh.change.target_revision
    assert swapped.number == 4 and swapped.model.variant == "INT4"
    assert gpu02.revisions.get(number=3).unit_text != first.unit_text  # the one numbered before
    back = rh.rollback_change
    assert rh.status == H.ROLLED_BACK and back.status == ChangeStatus.SUCCEEDED
    assert back.kind == ChangeKind.ROLLBACK and back.target_revision == first
    # Byte for byte on the host: the unit file it served when the rollout was approved.
    assert unit_file(fleet, "gpu-02").encode() == first.unit_text.encode()
    assert fleet.state("gpu-02")["units"][UNIT]["model_path"] == NVFP4
    gpu02.refresh_from_db()
    assert gpu02.current_revision == first
    assert DeploymentRevision.objects.filter(deployment=gpu02).count() == 4


def by_hand(deployment: Deployment, operator: Any, approver: Any, **kwargs: Any) -> None:
    """A change someone made on the host before the rollout, run to its end."""
    change = services.change_request_create(
        user=operator, deployment=deployment, snapshot=probe(deployment.host),
        reason="tuning the batch size", **kwargs,
    )  # fmt: skip
    if change.status == ChangeStatus.PENDING_APPROVAL:
        services.change_request_approve(
            change=change, approver=approver, snapshot=probe(deployment.host), reason="fine"
        )
    runner.change_execute(change_id=change.pk)
    change.refresh_from_db()
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    deployment.refresh_from_db()
