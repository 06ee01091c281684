"""Rollouts end to end: real simulated hosts over SSH, a real Celery worker on real Redis. The
rollout moves by itself from its approval on (each change's end has the worker look at it
again); the tests only read what the hosts and the database say."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from deployments.choices import ChangeKind, ChangeStatus
from deployments.models import ChangeRequest, ModelArtifact, Rollout, RolloutHost
from deployments.rollouts import decisions, orchestrator, requests
from deployments.rollouts.choices import (
    FINAL_ROLLOUT_STATUSES,
    GateCheck,
    RolloutHostStatus,
    RolloutStatus,
)
from hosts import services as host_services
from hosts.models import Host
from tests.fleet import RegisteredFleet, register
from tests.waiting import wait_until

pytestmark = pytest.mark.integration
H = RolloutHostStatus
UNIT = "vllm-kimi-k25.service"
NVFP4 = "/models/moonshotai/Kimi-K2.5-NVFP4"
INT4 = "/models/moonshotai/Kimi-K2.5-INT4"
# What a change writes to the host (as opposed to what it asks about).
WRITES = ("tee ", "systemctl restart")


def probe_all(fleet: RegisteredFleet) -> None:
    for host in fleet.hosts:
        snapshot = host_services.host_probe(
            host=Host.objects.select_related("credential").get(pk=host.pk), trigger="manual"
        )
        assert snapshot.status == "ok", snapshot.error


def swap(fleet: RegisteredFleet, operator: Any, approver: Any, **kwargs: Any) -> Rollout:
    """A rollout of a swap to Kimi-K2.5 INT4 over the fleet, approved: a worker starts it."""
    probe_all(fleet)
    kwargs.setdefault("wave_size", 2)
    kwargs.setdefault("max_down", 2)
    rollout = requests.rollout_create(
        user=operator, kind=ChangeKind.MODEL_SWAP, reason="INT4 serves more tokens per second",
        model=ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant="INT4"),
        hosts=list(fleet.hosts), **kwargs,
    )  # fmt: skip
    decisions.rollout_approve(rollout=rollout, approver=approver, reason="the canary will tell")
    return rollout


def finished(rollout: Rollout, timeout: float = 180) -> Rollout:
    def done() -> Rollout | None:
        rollout.refresh_from_db()
        return rollout if rollout.status in FINAL_ROLLOUT_STATUSES else None

    return wait_until(done, timeout=timeout, interval=0.2, explain=lambda: rows(rollout))


def rows(rollout: Rollout) -> dict[str, RolloutHost]:
    found = RolloutHost.objects.filter(rollout=rollout).select_related("host", "change")
    return {rh.host.name: rh for rh in found}


def serving(fleet: RegisteredFleet, name: str) -> str | None:
    return fleet.state(name)["units"][UNIT]["model_path"]


def writes(fleet: RegisteredFleet, name: str) -> list[str]:
    return [c for c in fleet.command_log(name) if any(w in c for w in WRITES)]


def test_a_model_swap_over_three_hosts_in_two_waves(make_fleet, celery_worker, operator, approver):
    fleet = register(make_fleet(3))
    rollout = finished(swap(fleet, operator, approver))
    assert rollout.status == RolloutStatus.SUCCEEDED, (rollout.status_reason, rows(rollout))
    assert rollout.waves == 2
    for name, rh in rows(rollout).items():
        assert serving(fleet, name) == INT4
        assert rh.status == H.SUCCEEDED and rh.change.status == ChangeStatus.SUCCEEDED
        # Its own change, on its own fresh snapshot, with the job's own checks.
        steps = [s.name for s in rh.change.steps.all()]
        assert steps[:4] == [
            "check the snapshot is still fresh", "check the approval", "take the host lease",
            "re-probe and compare with the decided snapshot",
        ]  # fmt: skip
        assert rh.change.snapshot.taken_at > rollout.approval().created_at
        assert len([c for c in writes(fleet, name) if c.startswith("sudo -n tee")]) == 1
    # The canary's change ended before either host of the second wave was asked for.
    canary = rows(rollout)["gpu-01"].change
    assert all(
        rh.change.created_at > canary.finished_at
        for name, rh in rows(rollout).items()
        if name != "gpu-01"
    )
    waves = AuditEvent.objects.filter(correlation_id=rollout.correlation_id).order_by("seq")
    assert [e.data["wave"] for e in waves.filter(action=AuditAction.ROLLOUT_WAVE_PASSED)] == [0, 1]
    assert waves.filter(action=AuditAction.ROLLOUT_SUCCEEDED).count() == 1


def test_a_canary_failing_its_coherence_suite_halts_and_is_rolled_back(
    make_fleet, celery_worker, operator, approver
):
    fleet = register(make_fleet(3))
    fleet.set_fault("gpu-01", "incoherent", models=[INT4])  # the new build answers nonsense
    rollout = finished(swap(fleet, operator, approver))
    assert rollout.status == RolloutStatus.HALTED, rollout.status_reason
    assert rollout.status_reason.startswith("the canary failed a check: gpu-01: coherence suite")
    found = rows(rollout)
    assert found["gpu-01"].status == H.ROLLED_BACK
    assert found["gpu-01"].gate_check == GateCheck.COHERENCE
    assert found["gpu-01"].change.status == ChangeStatus.ROLLED_BACK
    assert serving(fleet, "gpu-01") == NVFP4
    for name in ("gpu-02", "gpu-03"):
        assert found[name].status == H.NOT_REACHED and found[name].change is None
        assert serving(fleet, name) == NVFP4 and writes(fleet, name) == []


def test_a_failing_wave_rolls_back_the_hosts_it_changed(
    make_fleet, celery_worker, operator, approver
):
    fleet = register(make_fleet(3))
    fleet.set_fault("gpu-03", "incoherent", models=[INT4])
    rollout = finished(swap(fleet, operator, approver))
    assert rollout.status == RolloutStatus.HALTED, rollout.status_reason
    assert "wave 2 failed a check: gpu-03: coherence suite" in rollout.status_reason
    found = rows(rollout)
    assert found["gpu-01"].status == H.SUCCEEDED and serving(fleet, "gpu-01") == INT4
    # gpu-02 passed, but its wave did not: the rollout put it back with a change of its own.
    assert found["gpu-02"].status == H.ROLLED_BACK
    back = found["gpu-02"].rollback_change
    assert back.kind == ChangeKind.ROLLBACK and back.status == ChangeStatus.SUCCEEDED
    assert back.approvals.get().approver == approver
    assert serving(fleet, "gpu-02") == NVFP4
    # gpu-03's own job restored it when its suite failed.
    assert found["gpu-03"].status == H.ROLLED_BACK and found["gpu-03"].rollback_change is None
    assert serving(fleet, "gpu-03") == NVFP4
    events = AuditEvent.objects.filter(correlation_id=rollout.correlation_id)
    rolled = events.get(action=AuditAction.ROLLOUT_ROLLED_BACK)
    assert {h["host"]: h["status"] for h in rolled.data["hosts"]} == {
        "gpu-02": H.ROLLED_BACK, "gpu-03": H.ROLLED_BACK,
    }  # fmt: skip


def test_hosts_that_no_longer_match_are_skipped_and_reported(
    make_fleet, celery_worker, operator, approver
):
    from django.utils import timezone

    fleet = register(make_fleet(4))
    rollout = swap(fleet, operator, approver, wave_size=3, max_down=1)
    # After the approval: gpu-02 goes into maintenance, someone swaps gpu-03 by hand, and
    # gpu-04's engine dies behind its live API.
    Host.objects.filter(name="gpu-02").update(
        maintenance_until=timezone.now() + timezone.timedelta(hours=1),
        maintenance_reason="reseating GPU 3",
    )
    unit = fleet.run("gpu-03", f"cat /etc/systemd/system/{UNIT}")[0]
    fleet.set_unit_file(
        "gpu-03", UNIT,
        unit.replace(f"{NVFP4} --served-model-name kimi-k2.5",
                     "/models/Qwen/Qwen3-235B-A22B-FP8 --served-model-name qwen3-235b"),
        reload=True,
    )  # fmt: skip
    fleet.restart_unit("gpu-03")
    fleet.set_fault("gpu-04", "engine_core_died")
    rollout = finished(rollout)
    assert rollout.status == RolloutStatus.SUCCEEDED, rollout.status_reason
    assert rollout.status_reason == "1 hosts changed and checked, 3 skipped"
    found = rows(rollout)
    assert "in maintenance until" in found["gpu-02"].skip_reason
    assert found["gpu-03"].skip_reason.startswith("it serves qwen3-235b, not kimi-k2.5")
    assert found["gpu-04"].skip_reason.startswith("its verdict is failed")
    for name in ("gpu-02", "gpu-03", "gpu-04"):
        assert found[name].status == H.SKIPPED and found[name].change is None
        assert not ChangeRequest.objects.filter(host__name=name).exists()
    skipped = AuditEvent.objects.filter(action=AuditAction.ROLLOUT_HOST_SKIPPED)
    assert sorted(e.host_label for e in skipped) == ["gpu-02", "gpu-03", "gpu-04"]


def test_pause_resume_and_abort(make_fleet, celery_worker, operator, approver):
    fleet = register(make_fleet(4))
    rollout = swap(fleet, operator, approver, wave_size=1, max_down=1)
    wait_until(lambda: RolloutHost.objects.filter(rollout=rollout, change__isnull=False).exists())
    decisions.rollout_pause(rollout=rollout, user=operator)
    canary = RolloutHost.objects.get(rollout=rollout, host__name="gpu-01")

    def checked() -> bool:
        canary.refresh_from_db()
        return canary.status == H.SUCCEEDED

    wait_until(checked, timeout=120)
    # However often a worker looks at it now, no other host is started while it is paused.
    orchestrator.rollout_advance(rollout_id=rollout.pk)
    assert RolloutHost.objects.filter(rollout=rollout, status=H.PENDING).count() == 3
    assert Rollout.objects.get(pk=rollout.pk).status == RolloutStatus.PAUSED
    decisions.rollout_resume(rollout=rollout, user=approver)
    second = RolloutHost.objects.get(rollout=rollout, host__name="gpu-02")
    wait_until(lambda: RolloutHost.objects.filter(pk=second.pk, change__isnull=False).exists())
    decisions.rollout_abort(rollout=rollout, user=operator, reason="INT4 build recalled")
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.ABORTED
    # gpu-02's change was under way: it finishes, and its outcome is still recorded.
    wait_until(lambda: RolloutHost.objects.get(pk=second.pk).status == H.SUCCEEDED, timeout=120)
    found = rows(rollout)
    assert [found[n].status for n in ("gpu-03", "gpu-04")] == [H.NOT_REACHED, H.NOT_REACHED]
    assert writes(fleet, "gpu-03") == [] and writes(fleet, "gpu-04") == []
