"""How a wave ends: it passes (the next one starts, or the rollout succeeds), or it halts and
its changed hosts go back; and what the audit log says of waves. Called by the orchestrator,
under the rollout's row lock."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings

from controlplane.audit.actions import AuditAction

from .. import kinds
from ..choices import ChangeStatus
from . import lifecycle
from .choices import RolloutHostStatus, RolloutStatus
from .models import Rollout, RolloutHost
from .waves import wave_label

H = RolloutHostStatus
R = RolloutStatus


def rollout_hosts(rollout: Rollout) -> list[RolloutHost]:
    rows = RolloutHost.objects.filter(rollout=rollout).select_related("host", "change")
    hosts = list(rows.order_by("position"))
    for rh in hosts:
        rh.rollout = rollout
    return hosts


def wave_pass(rollout: Rollout, wave: list[RolloutHost], now: dt.datetime) -> None:
    lifecycle.rollout_record(
        rollout=rollout,
        action=AuditAction.ROLLOUT_WAVE_PASSED,
        data=wave_data(rollout.current_wave, wave),
    )
    following = rollout.current_wave + 1
    if following < rollout.waves:
        Rollout.objects.filter(pk=rollout.pk).update(current_wave=following, progress_at=now)
        rollout.current_wave, rollout.progress_at = following, now
        wave_started_record(rollout, following)
        return
    changed = sum(1 for rh in rollout_hosts(rollout) if rh.status == H.SUCCEEDED)
    skipped = sum(1 for rh in rollout_hosts(rollout) if rh.status == H.SKIPPED)
    lifecycle.rollout_transition(
        rollout=rollout,
        source=R.RUNNING,
        target=R.SUCCEEDED,
        action=AuditAction.ROLLOUT_SUCCEEDED,
        reason=f"{changed} hosts changed and checked, {skipped} skipped",
        now=now,
    )


def wave_halt(rollout: Rollout, reason: str, failed: list[RolloutHost], now: dt.datetime) -> None:
    lifecycle.rollout_transition(
        rollout=rollout,
        source=[R.RUNNING, R.PAUSED],
        target=R.HALTING,
        action=AuditAction.ROLLOUT_HALTED,
        reason=reason,
        data={
            "wave": rollout.current_wave,
            "failures": [
                {
                    "host": rh.host.name,
                    "check": rh.gate_check,
                    "failure": rh.gate_failure,
                    "change": rh.change_id,
                }
                for rh in failed
            ],
        },
        now=now,
    )


def wave_roll_back(rollout: Rollout, now: dt.datetime) -> None:
    """Once nothing of the halted wave is still changing, each of its hosts that was changed
    goes back; once they all have (or could not), the rollout is halted for good."""
    hosts = rollout_hosts(rollout)
    claim_lapse = settings.ROLLOUT_CLAIM_SECONDS
    if any(rh.status == H.RUNNING or rh.claimed(now, claim_lapse) for rh in hosts):
        return
    writes = kinds.spec(rollout.kind).writes_revision
    for rh in hosts:
        changed = rh.change is not None and rh.change.status == ChangeStatus.SUCCEEDED
        if (
            rh.wave == rollout.current_wave
            and rh.status in (H.SUCCEEDED, H.FAILED)
            and changed
            and writes
        ):
            lifecycle.rollout_host_transition(
                rollout_host=rh, source=rh.status, target=H.ROLLBACK_PENDING, now=now
            )
    if any(rh.status in (H.ROLLBACK_PENDING, H.ROLLING_BACK) for rh in hosts):
        return
    wave = [rh for rh in hosts if rh.wave == rollout.current_wave]
    lifecycle.rollout_transition(
        rollout=rollout,
        source=R.HALTING,
        target=R.HALTED,
        action=AuditAction.ROLLOUT_ROLLED_BACK,
        reason=rollout.status_reason,
        data=wave_data(rollout.current_wave, wave),
        now=now,
    )
    lifecycle.rollout_hosts_not_reached(rollout=rollout, now=now)


def wave_started_record(rollout: Rollout, wave: int, **extra: Any) -> None:
    names = list(
        RolloutHost.objects.filter(rollout=rollout, wave=wave)
        .order_by("position")
        .values_list("host__name", flat=True)
    )
    lifecycle.rollout_record(
        rollout=rollout,
        action=AuditAction.ROLLOUT_WAVE_STARTED,
        data={"wave": wave, "label": wave_label(wave), "hosts": names, **extra},
    )


def wave_data(wave: int, hosts: list[RolloutHost]) -> dict[str, Any]:
    return {
        "wave": wave,
        "label": wave_label(wave),
        "hosts": [
            {
                "host": rh.host.name,
                "status": rh.status,
                "change": rh.change_id,
                "check": rh.gate_check or None,
                "failure": rh.gate_failure or None,
                "skipped": rh.skip_reason or None,
                "figures": rh.gate or None,
            }
            for rh in hosts
        ],
    }
