"""Fault: the worker carrying a rollout is SIGKILLed in the middle of a host's turn.

The second wave's first host answers slowly; the worker is killed while it probes that host,
after claiming its turn and before any change was requested for it. Nothing tells the control
plane. A new worker with beat (short sweeps and claims) must take the rollout on from its
record: the dead worker's claim lapses, the turn is taken again on a new probe, and the rollout
succeeds with every host changed exactly once.
"""

from __future__ import annotations

import uuid

import pytest

from deployments.choices import ChangeKind, ChangeStatus
from deployments.models import ChangeRequest, ModelArtifact, Rollout, RolloutHost
from deployments.rollouts import decisions, requests
from deployments.rollouts.choices import RolloutHostStatus, RolloutStatus
from tests.chaos.jobs import host_commands, is_probe, probe
from tests.fleet import register
from tests.waiting import wait_until
from tests.workers import private_worker, start_worker

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
]
UNIT = "vllm-kimi-k25.service"
INT4 = "/models/moonshotai/Kimi-K2.5-INT4"
SHORT = {"ROLLOUT_CLAIM_SECONDS": "4", "ROLLOUT_SWEEP_SECONDS": "1"}


def test_a_worker_killed_mid_turn_resumes_from_the_record_changing_no_host_twice(
    make_fleet, tmp_path, operator, approver
):
    fleet = register(make_fleet(3))
    for host in fleet.hosts:
        probe(host)
    rollout = requests.rollout_create(
        user=operator, kind=ChangeKind.MODEL_SWAP, reason="INT4 serves more tokens per second",
        model=ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant="INT4"),
        hosts=list(fleet.hosts), wave_size=2, max_down=1,
    )  # fmt: skip
    second = RolloutHost.objects.get(rollout=rollout, host__name="gpu-02")
    fleet.set_slow_seconds(25, "gpu-02")
    fleet.set_fault("gpu-02", "slow")
    fleet.clear_command_log("gpu-02")
    queue = f"test-rollout-kill-{uuid.uuid4().hex[:12]}"
    with private_worker(queue, tmp_path / "doomed.log", **SHORT) as doomed:
        decisions.rollout_approve(rollout=rollout, approver=approver, reason="canary first")
        # The canary passes; gpu-02's turn is claimed and its probe hangs on the slow host.
        wait_until(
            lambda: RolloutHost.objects.filter(pk=second.pk).exclude(claim_token="").exists(),
            timeout=120, explain=doomed.output,
        )  # fmt: skip
        wait_until(lambda: any(is_probe(c) for c in fleet.command_log("gpu-02")), timeout=30)
        doomed.kill()
        fleet.set_fault("gpu-02", "slow", on=False)
        second.refresh_from_db()
        assert second.status == RolloutHostStatus.PENDING and second.change_id is None
        assert not ChangeRequest.objects.filter(host__name="gpu-02").exists()
        assert Rollout.objects.get(pk=rollout.pk).status == RolloutStatus.RUNNING
        # A worker that lives, with beat: its sweep finds the rollout, the claim lapses, and
        # the turn is taken again.
        survivor = start_worker(queue, tmp_path / "survivor.log", beat=True, **SHORT)
        try:

            def done() -> Rollout | None:
                found = Rollout.objects.get(pk=rollout.pk)
                return found if found.status == RolloutStatus.SUCCEEDED else None

            wait_until(done, timeout=180, interval=0.2, explain=survivor.output)
            assert "deployments.tasks.rollouts_sweep" in survivor.output()  # beat looked
        finally:
            survivor.stop()
    for host in fleet.hosts:
        changes = ChangeRequest.objects.filter(host=host)
        assert changes.count() == 1, host.name
        assert changes.get().status == ChangeStatus.SUCCEEDED
        assert fleet.state(host.name)["units"][UNIT]["model_path"] == INT4
        written = [c for c in host_commands(fleet.command_log(host.name)) if "tee --" in c]
        assert len(written) == 1, (host.name, written)
