"""What a worker does each time it looks at a rollout (rollout_advance), and which rollouts beat
has it look at (rollouts_due). Everything is read from the rows, so any worker may look at any
time, twice at once, or after another was killed mid-way: the rollout goes on from its record.

One look: record how each finished change went (gates), then, under the rollout's row lock,
decide (start it, halt it, pass a wave, finish, or roll the failed wave back) and claim the
turns there is room for (at most `max_down` hosts changing at once); then take those turns
(deployments.rollouts.turns) outside the lock. Repeat while turns end without a change to wait
for (a skipped host), so a wave of skipped hosts does not wait for the next look.
"""

from __future__ import annotations

import datetime as dt
import uuid

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from controlplane.audit.actions import AuditAction

from ..choices import FINAL_STATUSES, ChangeStatus
from . import lifecycle
from .choices import (
    ACTIVE_ROLLOUT_STATUSES,
    BUSY_HOST_STATUSES,
    DONE_HOST_STATUSES,
    RolloutHostStatus,
    RolloutStatus,
)
from .gates import change_judged
from .models import Rollout, RolloutHost
from .requests import rollout_drain_problem, rollout_hosts_digest, rollout_params_digest
from .turns import turn_taken
from .wave_ends import (
    rollout_hosts,
    wave_halt,
    wave_pass,
    wave_roll_back,
    wave_started_record,
)
from .waves import wave_label

H = RolloutHostStatus
R = RolloutStatus
Claim = tuple[int, str, bool]  # (rollout host id, token, rollback)


def rollout_advance(*, rollout_id: int) -> Rollout | None:
    """Look at a rollout once (see the module's docstring). Returns it as it is afterwards."""
    if not Rollout.objects.filter(pk=rollout_id).exists():
        return None
    for _ in range(RolloutHost.objects.filter(rollout_id=rollout_id).count() + 2):
        rollout_sync(rollout_id=rollout_id)
        claims = rollout_decide(rollout_id=rollout_id)
        if not claims:
            break
        for rollout_host_id, token, rollback in claims:
            turn_taken(rollout_host_id=rollout_host_id, token=token, rollback=rollback)
    return Rollout.objects.get(pk=rollout_id)


def rollouts_due() -> list[int]:
    """The rollouts beat's sweep has a worker look at: those still going, and ended ones with a
    change still running on a host (an aborted rollout's, whose outcome is still recorded)."""
    return list(
        Rollout.objects.filter(
            Q(status__in=ACTIVE_ROLLOUT_STATUSES) | Q(hosts__status__in=BUSY_HOST_STATUSES)
        )
        .distinct()
        .order_by("pk")
        .values_list("pk", flat=True)
    )


# --- recording how changes went -----------------------------------------------------------


def rollout_sync(*, rollout_id: int, now: dt.datetime | None = None) -> int:
    """Each host whose change (or rollback) has ended takes the status its gates give it.
    Returns how many moved. Conditional moves: a second worker doing the same writes nothing."""
    now = now or timezone.now()
    rollout = Rollout.objects.get(pk=rollout_id)
    moved = 0
    busy = RolloutHost.objects.filter(rollout=rollout, status__in=BUSY_HOST_STATUSES)
    for rh in busy.select_related("host", "change", "rollback_change"):
        rh.rollout = rollout
        if rh.status == H.RUNNING and rh.change is not None:
            moved += _judge(rollout, rh, now)
        elif rh.rollback_change is not None and rh.rollback_change.status in FINAL_STATUSES:
            back = rh.rollback_change
            target = H.ROLLED_BACK if back.status == ChangeStatus.SUCCEEDED else H.ROLLBACK_FAILED
            text = f"rollback change #{back.pk} {ChangeStatus(back.status).label}"
            why = (
                {} if target == H.ROLLED_BACK else {"skip_reason": f"{text}: {back.status_reason}"}
            )
            moved += lifecycle.rollout_host_transition(
                rollout_host=rh,
                source=H.ROLLING_BACK,
                target=target,
                action=AuditAction.ROLLOUT_HOST_CHECKED,
                data={"rollback_change": back.pk, "outcome": back.status},
                fields=why,
                now=now,
            )
    if moved:
        Rollout.objects.filter(pk=rollout.pk).update(progress_at=now)
    return moved


def _judge(rollout: Rollout, rh: RolloutHost, now: dt.datetime) -> int:
    change = rh.change
    assert change is not None
    if change.status not in FINAL_STATUSES:
        return 0
    judged = change_judged(
        change=change, benchmark=rollout.benchmark, margin_pct=rollout.benchmark_margin_pct
    )
    action = (
        AuditAction.ROLLOUT_HOST_SKIPPED if judged.skip_reason else AuditAction.ROLLOUT_HOST_CHECKED
    )
    return lifecycle.rollout_host_transition(
        rollout_host=rh,
        source=H.RUNNING,
        target=judged.status,
        action=action,
        data={
            "change": change.pk,
            "outcome": change.status,
            "passed": judged.passed,
            "check": judged.check or None,
            "failure": judged.failure or None,
            "reason": judged.skip_reason or None,
            "figures": judged.figures,
        },
        fields={
            "gate_check": judged.check,
            "gate_failure": judged.failure,
            "gate": judged.figures,
            "skip_reason": judged.skip_reason,
        },
        now=now,
    )


# --- deciding, under the rollout's row lock ----------------------------------------------------


def rollout_decide(*, rollout_id: int, now: dt.datetime | None = None) -> list[Claim]:
    """Move the rollout on as its hosts say, and claim the turns there is room for."""
    now = now or timezone.now()
    with transaction.atomic():
        rollout = Rollout.objects.select_for_update().get(pk=rollout_id)
        if rollout.status == R.APPROVED:
            _start(rollout, now)
        if rollout.status in (R.RUNNING, R.PAUSED):
            _check_wave(rollout, now)
        if rollout.status == R.HALTING:
            wave_roll_back(rollout, now)
        if rollout.status == R.RUNNING:
            return _claim(rollout, now, rollback=False)
        if rollout.status == R.HALTING:
            return _claim(rollout, now, rollback=True)
    return []


def _start(rollout: Rollout, now: dt.datetime) -> None:
    """A worker's first look: the approval must not have expired (it is given to start the
    rollout while what it was bound to is recent)."""
    approval = rollout.approval()
    problem = _approval_problem(rollout)
    if approval is not None and approval.expires_at is not None and approval.expires_at <= now:
        problem = (
            f"the approval by {approval.approver_name} expired at "
            f"{approval.expires_at.isoformat(timespec='seconds')} before a worker started it"
        )
    if problem:
        _fail(rollout, problem, now)
        return
    lifecycle.rollout_transition(
        rollout=rollout,
        source=R.APPROVED,
        target=R.RUNNING,
        action=AuditAction.ROLLOUT_STARTED,
        fields={"started_at": now},
        now=now,
    )
    wave_started_record(rollout, 0)


def _approval_problem(rollout: Rollout) -> str | None:
    """What no longer holds of the approval a running rollout goes on under."""
    approval = rollout.approval()
    if approval is None:
        return "it has no approval"
    if approval.params_digest != rollout_params_digest(rollout):
        return "its parameters are not the ones its approval was given for"
    if approval.hosts_digest != rollout_hosts_digest(rollout):
        return "what its hosts served when approved was changed afterwards"
    approver = approval.approver
    if approver is None or not approver.is_active:
        return f"its approver ({approval.approver_name}) no longer has an active account"
    if rollout.benchmark:
        profile = rollout.benchmark_profile
        if profile is None or profile.definition() != rollout.benchmark:
            return "the benchmark profile it was approved with was changed or removed since"
    return rollout_drain_problem(rollout)


def _fail(rollout: Rollout, problem: str, now: dt.datetime) -> None:
    lifecycle.rollout_transition(
        rollout=rollout,
        source=[R.APPROVED, R.RUNNING, R.PAUSED],
        target=R.FAILED,
        action=AuditAction.ROLLOUT_FAILED,
        reason=f"stopped: {problem}",
        now=now,
    )
    lifecycle.rollout_hosts_not_reached(rollout=rollout, now=now)


def _check_wave(rollout: Rollout, now: dt.datetime) -> None:
    """Halt on a failed check or a passed deadline; pass the wave once every host is done."""
    problem = _approval_problem(rollout)
    if problem:
        _fail(rollout, problem, now)
        return
    hosts = rollout_hosts(rollout)
    wave = [rh for rh in hosts if rh.wave == rollout.current_wave]
    failed = [rh for rh in wave if rh.gate_check]
    if failed:
        where = "; ".join(f"{rh.host.name}: {rh.gate_failure}" for rh in failed)
        wave_halt(
            rollout, f"{wave_label(rollout.current_wave)} failed a check: {where}", failed, now
        )
        return
    if rollout.status != R.RUNNING:
        return
    if _deadline_passed(rollout, now):
        wave_halt(
            rollout,
            f"the progress deadline passed: no host finished its turn in "
            f"{rollout.progress_deadline_seconds} s",
            [],
            now,
        )
        return
    if any(rh.status not in DONE_HOST_STATUSES for rh in wave):
        return
    if rollout.current_wave == 0 and _replace_canary(rollout, hosts, wave):
        return
    wave_pass(rollout, wave, now)


def _deadline_passed(rollout: Rollout, now: dt.datetime) -> bool:
    since = rollout.progress_at or rollout.started_at
    if since is None:
        return False
    return (now - since).total_seconds() > rollout.progress_deadline_seconds


def _replace_canary(rollout: Rollout, hosts: list[RolloutHost], wave: list[RolloutHost]) -> bool:
    """A canary that was skipped proved nothing: the next waiting host becomes the canary, so no
    wave after it goes ahead before one host has been changed and checked."""
    if any(rh.status != H.SKIPPED for rh in wave):
        return False
    waiting = [rh for rh in hosts if rh.wave > 0 and rh.status == H.PENDING]
    if not waiting:
        return False
    RolloutHost.objects.filter(pk=waiting[0].pk).update(wave=0)
    wave_started_record(rollout, 0, replaces=[rh.host.name for rh in wave])
    return True


def _claim(rollout: Rollout, now: dt.datetime, *, rollback: bool) -> list[Claim]:
    """Claim as many turns as `max_down` leaves room for: the current wave's waiting hosts
    going forward, or a halted wave's hosts to roll back."""
    lapse = settings.ROLLOUT_CLAIM_SECONDS
    hosts = rollout_hosts(rollout)
    busy = sum(1 for rh in hosts if rh.status in BUSY_HOST_STATUSES or rh.claimed(now, lapse))
    if rollback:
        waiting = [rh for rh in hosts if rh.status == H.ROLLBACK_PENDING]
    else:
        waiting = [rh for rh in hosts if rh.wave == rollout.current_wave and rh.status == H.PENDING]
    claims: list[Claim] = []
    for rh in waiting:
        if busy >= rollout.max_down:
            break
        if rh.claimed(now, lapse):
            continue
        token = uuid.uuid4().hex
        lapsed = Q(claim_token="") | Q(claimed_at__lte=now - dt.timedelta(seconds=lapse))
        taken = RolloutHost.objects.filter(lapsed, pk=rh.pk, status=rh.status).update(
            claim_token=token, claimed_at=now
        )
        if taken:
            claims.append((rh.pk, token, rollback))
            busy += 1
    return claims
