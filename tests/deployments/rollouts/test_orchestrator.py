"""What a worker does each time it looks at a rollout, driven without SSH: turns are taken on
snapshots the test stores, and each change ends through its lifecycle with the evaluations its
job would have written (tests/deployments/rollouts/conftest.py). The rollouts against real
simulated hosts and a real worker are in test_rollout_runs.py."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.conf import settings
from django.utils import timezone

from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from deployments.choices import ChangeKind, ChangeStatus
from deployments.models import ChangeRequest, Rollout, RolloutHost
from deployments.rollouts import orchestrator, turns
from deployments.rollouts.choices import GateCheck, RolloutHostStatus, RolloutStatus
from deployments.rollouts.requests import rollout_params_digest
from hosts.models import Host
from tests import factories as f

from .conftest import approved, end_change, fresh, hosts_of, swap_rollout, take_turns

pytestmark = pytest.mark.django_db
H = RolloutHostStatus


def actions(rollout: Rollout) -> list[str]:
    return list(
        AuditEvent.objects.filter(
            correlation_id=rollout.correlation_id, action__startswith="rollout."
        )
        .order_by("seq")
        .values_list("action", flat=True)
    )


@pytest.fixture
def rollout(operator, approver, fleet, catalog) -> Rollout:
    """gpu-01 the canary, then gpu-02 and gpu-03, then gpu-04; two hosts down at once."""
    return approved(swap_rollout(operator, fleet, catalog["INT4"]), approver)


def test_a_rollout_goes_wave_by_wave_each_host_through_its_own_change(
    rollout, approver, operator
) -> None:
    [canary] = take_turns(rollout)
    assert rollout.status == RolloutStatus.RUNNING and rollout.started_at is not None
    assert canary.host.name == "gpu-01" and canary.status == H.RUNNING
    change = canary.change
    # A change like any other, on the snapshot the turn took, granted under the rollout's
    # approval by its approver, queued for the runner.
    assert change.kind == ChangeKind.MODEL_SWAP and change.status == ChangeStatus.QUEUED
    assert change.requested_by == operator and change.params["rollout"] == rollout.pk
    grant = change.approvals.get()
    assert grant.approver == approver and f"rollout #{rollout.pk}" in grant.reason
    assert grant.snapshot_id == change.snapshot_id and grant.params_digest == change.params_digest
    assert take_turns(rollout) == []  # the canary alone until it has passed

    end_change(change)
    second = take_turns(rollout)
    assert sorted(rh.host.name for rh in second) == ["gpu-02", "gpu-03"]  # max_down 2
    assert hosts_of(rollout)["gpu-01"].status == H.SUCCEEDED
    assert rollout.current_wave == 1
    for rh in second:
        end_change(rh.change)
    [last] = take_turns(rollout)
    assert last.host.name == "gpu-04"
    end_change(last.change)
    take_turns(rollout)
    assert rollout.status == RolloutStatus.SUCCEEDED
    assert rollout.status_reason == "4 hosts changed and checked, 0 skipped"
    assert actions(rollout) == [
        "rollout.requested", "rollout.approved", "rollout.started",
        "rollout.wave_started", "rollout.host_checked", "rollout.wave_passed",
        "rollout.wave_started", "rollout.host_checked", "rollout.host_checked",
        "rollout.wave_passed", "rollout.wave_started", "rollout.host_checked",
        "rollout.wave_passed", "rollout.succeeded",
    ]  # fmt: skip
    assert ChangeRequest.objects.count() == 4


def test_max_down_holds_the_hosts_changing_at_once(operator, approver, fleet, catalog) -> None:
    rollout = approved(
        swap_rollout(operator, fleet, catalog["INT4"], wave_size=3, max_down=1), approver
    )
    end_change(take_turns(rollout)[0].change)
    [first] = take_turns(rollout)
    assert take_turns(rollout) == []
    end_change(first.change)
    [second] = take_turns(rollout)
    assert second.host.name == "gpu-03"


def test_a_canary_failing_its_coherence_suite_halts_the_rollout(rollout) -> None:
    [canary] = take_turns(rollout)
    # Its job found the new model incoherent and restored the previous revision.
    end_change(canary.change, ChangeStatus.ROLLED_BACK, coherent=False, reason="incoherent")
    take_turns(rollout)
    rows = hosts_of(rollout)
    assert rows["gpu-01"].status == H.ROLLED_BACK
    assert rows["gpu-01"].gate_check == GateCheck.COHERENCE
    assert "factual, arithmetic" in rows["gpu-01"].gate_failure
    assert rollout.status == RolloutStatus.HALTED
    assert "the canary failed a check: gpu-01: coherence suite" in rollout.status_reason
    assert {rows[n].status for n in ("gpu-02", "gpu-03", "gpu-04")} == {H.NOT_REACHED}
    assert ChangeRequest.objects.count() == 1  # its own job put it back; nothing else changed
    halted = AuditEvent.objects.get(action=AuditAction.ROLLOUT_HALTED)
    assert halted.data["failures"][0]["host"] == "gpu-01"
    assert halted.data["failures"][0]["check"] == "coherence"
    assert actions(rollout)[-2:] == ["rollout.halted", "rollout.rolled_back"]


def test_a_wave_that_fails_rolls_back_its_changed_hosts(operator, approver, fleet, catalog):
    f.default_benchmark_profile()
    rollout = approved(
        swap_rollout(operator, fleet, catalog["INT4"], benchmark=True, benchmark_margin_pct=10),
        approver,
    )
    end_change(take_turns(rollout)[0].change, bench=(1000, 1900))
    second = {rh.host.name: rh for rh in take_turns(rollout)}
    assert second["gpu-02"].change.params["benchmark"]["name"] == "standard"
    # gpu-02 is fine; gpu-03 serves at half its own baseline, which the 10 % margin fails.
    end_change(second["gpu-02"].change, bench=(1000, 2000))
    end_change(second["gpu-03"].change, bench=(1000, 500))
    back = {rh.host.name: rh for rh in take_turns(rollout)}
    assert rollout.status == RolloutStatus.HALTING
    assert "gpu-03: benchmark: 50% of this host's baseline throughput at 1 concurrent" in (
        rollout.status_reason
    )
    rows = hosts_of(rollout)
    assert rows["gpu-03"].gate_check == GateCheck.BENCHMARK
    assert rows["gpu-03"].gate["ratio"] == 0.5 and rows["gpu-03"].gate["floor"] == 0.9
    # Both hosts of the wave were changed, so both go back; the canary's wave had passed.
    assert sorted(back) == ["gpu-02", "gpu-03"]
    for rh in back.values():
        assert rh.status == H.ROLLING_BACK
        rollback = rh.rollback_change
        assert rollback.kind == ChangeKind.ROLLBACK and rollback.status == ChangeStatus.QUEUED
        assert rollback.target_revision == rh.change.from_revision
        assert rollback.approvals.get().approver == approver
        assert f"rollout #{rollout.pk} halted" in rollback.reason
        end_change(rollback)
    take_turns(rollout)
    rows = hosts_of(rollout)
    assert rollout.status == RolloutStatus.HALTED
    assert [rows[n].status for n in ("gpu-01", "gpu-02", "gpu-03", "gpu-04")] == [
        H.SUCCEEDED, H.ROLLED_BACK, H.ROLLED_BACK, H.NOT_REACHED,
    ]  # fmt: skip
    rolled = AuditEvent.objects.get(action=AuditAction.ROLLOUT_ROLLED_BACK)
    assert [h["status"] for h in rolled.data["hosts"]] == [H.ROLLED_BACK, H.ROLLED_BACK]


def test_hosts_that_no_longer_match_are_skipped_and_reported(rollout, fleet) -> None:
    end_change(take_turns(rollout)[0].change)
    Host.objects.filter(name="gpu-02").update(
        maintenance_until=timezone.now() + dt.timedelta(hours=2),
        maintenance_reason="reseating GPU 3",
    )
    take_turns(rollout, gpu_03={"model": "qwen3-235b"})
    rows = hosts_of(rollout)
    assert rows["gpu-02"].status == H.SKIPPED
    assert "in maintenance until" in rows["gpu-02"].skip_reason
    assert "reseating GPU 3" in rows["gpu-02"].skip_reason
    assert rows["gpu-03"].status == H.SKIPPED
    assert rows["gpu-03"].skip_reason == (
        "it serves qwen3-235b, not kimi-k2.5 as when the rollout was approved"
    )
    assert rows["gpu-02"].change is None and rows["gpu-03"].change is None
    # The wave has nothing left to wait for: the next look starts the next one.
    [last] = take_turns(rollout, gpu_04={"active": "failed"})
    assert last.status == H.SKIPPED and last.skip_reason.startswith("its verdict is failed")
    take_turns(rollout)
    assert rollout.status == RolloutStatus.SUCCEEDED
    assert rollout.status_reason == "1 hosts changed and checked, 3 skipped"
    skipped = AuditEvent.objects.filter(action=AuditAction.ROLLOUT_HOST_SKIPPED)
    assert sorted(e.host_label for e in skipped) == ["gpu-02", "gpu-03", "gpu-04"]


def test_a_skipped_canary_is_replaced_by_the_next_host(rollout) -> None:
    [canary] = take_turns(rollout, gpu_01={"main_pid": 1234, "model": "other"})
    assert canary.status == H.SKIPPED
    [replacement] = take_turns(rollout)
    assert replacement.host.name == "gpu-02"
    rows = hosts_of(rollout)
    assert rows["gpu-02"].wave == 0 and rows["gpu-02"].status == H.RUNNING
    assert rows["gpu-03"].status == H.PENDING  # the new canary goes alone
    assert rollout.current_wave == 0
    started = AuditEvent.objects.filter(action=AuditAction.ROLLOUT_WAVE_STARTED).order_by("seq")
    assert started.last().data["replaces"] == ["gpu-01"]


def test_an_approval_not_started_in_time_lapses(rollout) -> None:
    grant = rollout.approval()
    with time_machine.travel(grant.expires_at + dt.timedelta(seconds=1), tick=False):
        assert take_turns(rollout) == []
    assert rollout.status == RolloutStatus.FAILED
    assert rollout.status_reason.startswith("stopped: the approval by anna expired at")
    assert not ChangeRequest.objects.exists()


def test_parameters_changed_after_approval_stop_the_rollout(rollout) -> None:
    take_turns(rollout)
    Rollout.objects.filter(pk=rollout.pk).update(max_down=4)
    take_turns(rollout)
    assert rollout.status == RolloutStatus.FAILED
    assert "not the ones its approval was given for" in rollout.status_reason
    assert rollout_params_digest(rollout) != rollout.approval().params_digest


def test_the_progress_deadline_halts_a_rollout_that_stopped_moving(rollout) -> None:
    take_turns(rollout)
    later = timezone.now() + dt.timedelta(seconds=rollout.progress_deadline_seconds + 1)
    with time_machine.travel(later, tick=False):
        take_turns(rollout)
    assert rollout.status == RolloutStatus.HALTING
    assert rollout.status_reason == (
        "the progress deadline passed: no host finished its turn in 1800 s"
    )
    assert take_turns(rollout) == []  # waits for the canary's change to end
    rows = hosts_of(rollout)
    end_change(rows["gpu-01"].change)
    [back] = take_turns(rollout)
    assert back.host.name == "gpu-01" and back.status == H.ROLLING_BACK


def test_paused_no_host_is_started_but_a_failure_still_halts(rollout, operator) -> None:
    from deployments.rollouts import decisions

    [canary] = take_turns(rollout)
    decisions.rollout_pause(rollout=rollout, user=operator)
    end_change(canary.change, ChangeStatus.FAILED, coherent=False, reason="incoherent")
    take_turns(rollout)
    assert rollout.status == RolloutStatus.HALTED
    assert hosts_of(rollout)["gpu-01"].status == H.FAILED


def test_a_paused_rollout_starts_nothing_until_resumed(rollout, operator) -> None:
    from deployments.rollouts import decisions

    end_change(take_turns(rollout)[0].change)
    decisions.rollout_pause(rollout=rollout, user=operator)
    assert take_turns(rollout) == []
    assert rollout.status == RolloutStatus.PAUSED and rollout.current_wave == 0
    decisions.rollout_resume(rollout=rollout, user=operator)
    assert len(take_turns(rollout)) == 2


def test_a_turn_whose_worker_died_is_taken_again_and_the_host_changed_once(rollout) -> None:
    claims = orchestrator.rollout_decide(rollout_id=rollout.pk)
    [(rh_id, token, _)] = claims
    # The worker died while probing: the claim holds the turn until it lapses.
    assert orchestrator.rollout_decide(rollout_id=rollout.pk) == []
    later = timezone.now() + dt.timedelta(seconds=settings.ROLLOUT_CLAIM_SECONDS + 1)
    with time_machine.travel(later, tick=False):
        [(again_id, again_token, _)] = orchestrator.rollout_decide(rollout_id=rollout.pk)
        assert again_id == rh_id and again_token != token
        host = RolloutHost.objects.get(pk=rh_id).host
        turns.host_turn_on(rollout_host_id=rh_id, token=again_token, snapshot=fresh(host))
        # The first worker comes back to life and finishes its turn: nothing happens.
        turns.host_turn_on(rollout_host_id=rh_id, token=token, snapshot=fresh(host))
        turns.host_turn_on(rollout_host_id=rh_id, token=again_token, snapshot=fresh(host))
    assert ChangeRequest.objects.filter(host=host).count() == 1
    assert RolloutHost.objects.get(pk=rh_id).status == H.RUNNING


def test_an_aborted_rollout_still_records_how_its_running_change_ended(rollout, operator):
    from deployments.rollouts import decisions

    [canary] = take_turns(rollout)
    decisions.rollout_abort(rollout=rollout, user=operator, reason="the build is recalled")
    assert orchestrator.rollouts_due() == [rollout.pk]  # a change still runs
    end_change(canary.change)
    take_turns(rollout)
    assert hosts_of(rollout)["gpu-01"].status == H.SUCCEEDED
    assert rollout.status == RolloutStatus.ABORTED
    assert orchestrator.rollouts_due() == []


def test_a_change_ending_has_a_worker_look_at_its_rollout(
    rollout, django_capture_on_commit_callbacks
) -> None:
    from deployments.rollouts import receivers

    [canary] = take_turns(rollout)
    end_change(canary.change)
    ended = AuditEvent.objects.get(action=AuditAction.CHANGE_SUCCEEDED)
    started = AuditEvent.objects.filter(action=AuditAction.CHANGE_APPROVED).first()
    with django_capture_on_commit_callbacks() as kicks:
        receivers.change_ended(sender=None, event=ended)
    assert len(kicks) == 1  # dispatch.rollout_advance_on_commit(rollout)
    with django_capture_on_commit_callbacks() as none:
        receivers.change_ended(sender=None, event=started)
    assert none == []


def test_paused_mid_wave_no_other_host_of_it_is_started(operator, approver, fleet, catalog):
    from deployments.rollouts import decisions

    rollout = approved(
        swap_rollout(operator, fleet, catalog["INT4"], wave_size=3, max_down=1), approver
    )
    end_change(take_turns(rollout)[0].change)
    [first] = take_turns(rollout)
    decisions.rollout_pause(rollout=rollout, user=operator)
    end_change(first.change)
    assert take_turns(rollout) == []  # not even claimed (no probe of the next host)
    rows = hosts_of(rollout)
    assert rows["gpu-02"].status == H.SUCCEEDED
    assert [rows[n].status for n in ("gpu-03", "gpu-04")] == [H.PENDING, H.PENDING]
    assert not rows["gpu-03"].claim_token


def test_a_restart_needs_no_grant_per_host_and_halts_without_a_rollback(
    operator, approver, fleet
) -> None:
    from deployments.rollouts import requests

    rollout = approved(
        requests.rollout_create(
            user=operator, kind="restart", reason="pick up the new driver",
            hosts=[d.host for d in fleet], wave_size=3, max_down=3,
        ),
        approver,
    )  # fmt: skip
    [canary] = take_turns(rollout)
    # A restart changes nothing that serves: its change is queued without an approval of its own.
    assert canary.change.status == ChangeStatus.QUEUED and not canary.change.approvals.exists()
    end_change(canary.change)
    wave = take_turns(rollout)
    end_change(wave[0].change)
    end_change(wave[1].change, ChangeStatus.FAILED, coherent=False, reason="incoherent")
    end_change(wave[2].change)
    assert take_turns(rollout) == []  # a restart writes no revision: nothing to go back to
    assert rollout.status == RolloutStatus.HALTED
    rows = hosts_of(rollout)
    assert rows["gpu-02"].status == H.SUCCEEDED and rows["gpu-03"].status == H.FAILED
    assert not ChangeRequest.objects.filter(kind=ChangeKind.ROLLBACK).exists()
