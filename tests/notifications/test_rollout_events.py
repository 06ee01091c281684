"""A rollout's audit events as webhooks: approval needed, approved, each wave started and
passed, halted (which check failed where), rolled back, succeeded, aborted; and no "approval
needed" for the changes a rollout grants under its own approval."""

from __future__ import annotations

import pytest

from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from controlplane.notifications.choices import EventType
from controlplane.notifications.events import notifications_for
from deployments.choices import ChangeStatus
from deployments.rollouts import decisions
from tests import factories as f
from tests.deployments.rollouts.conftest import (
    approved,
    end_change,
    fresh,
    swap_rollout,
    take_turns,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(catalog):
    deployments = []
    for i in (1, 2, 3):
        host = f.make_host(f"gpu-0{i}", port=2200 + i)
        deployments.append(f.make_deployment(host, catalog["NVFP4"]))
        fresh(host)
    return deployments


@pytest.fixture
def catalog(db):
    return f.make_catalog()


def notes(action: str) -> list:
    events = AuditEvent.objects.filter(action=action).order_by("seq")
    return [n for e in events for n in notifications_for(e)]


def test_a_rollout_that_halts_says_so_at_each_step(operator, approver, fleet, catalog) -> None:
    rollout = swap_rollout(operator, fleet, catalog["INT4"])
    [needed] = notes(AuditAction.ROLLOUT_REQUESTED)
    assert needed.event_type == EventType.ROLLOUT_APPROVAL_NEEDED
    assert needed.text.startswith(f"otto requested rollout #{rollout.pk}: model swap to ")
    assert "over 3 hosts in 2 waves; it needs approval by a second person" in needed.text
    assert needed.link == f"/rollouts/{rollout.pk}/"
    approved(rollout, approver)
    [canary] = take_turns(rollout)
    # The canary's own change was granted as it was made: nobody is asked to approve it.
    assert notes(AuditAction.CHANGE_REQUESTED) == []
    end_change(canary.change)
    wave = take_turns(rollout)
    end_change(wave[0].change)
    end_change(wave[1].change, ChangeStatus.ROLLED_BACK, coherent=False, reason="incoherent")
    [back] = take_turns(rollout)  # halts; the wave's host that changed goes back
    end_change(back.rollback_change)
    take_turns(rollout)
    kinds = [n.event_type for e in AuditEvent.objects.order_by("seq") for n in notifications_for(e)
             if n.event_type.startswith("rollout.")]  # fmt: skip
    assert kinds == [
        "rollout.approval_needed", "rollout.approved", "rollout.wave_started",
        "rollout.wave_passed", "rollout.wave_started", "rollout.halted", "rollout.rolled_back",
    ]  # fmt: skip
    [halted] = notes(AuditAction.ROLLOUT_HALTED)
    assert halted.text == (
        f"Rollout #{rollout.pk} (model swap to moonshotai/Kimi-K2.5 (INT4)) halted: wave 2 "
        "failed a check: gpu-03: coherence suite after the change: failed 2 of 6 checks "
        "(factual, arithmetic)"
    )
    assert halted.data["failures"] == [
        {"host": "gpu-03", "check": "coherence", "change": wave[1].change_id,
         "failure": "coherence suite after the change: failed 2 of 6 checks (factual, arithmetic)"}
    ]  # fmt: skip
    [rolled] = notes(AuditAction.ROLLOUT_ROLLED_BACK)
    assert rolled.text.endswith("wave 2 rolled back (gpu-02 rolled back, gpu-03 rolled back).")
    assert rolled.data["rollout"]["status"] == "halted"


def test_an_abort_names_who_and_why(operator, approver, fleet, catalog) -> None:
    rollout = swap_rollout(operator, fleet, catalog["INT4"])
    decisions.rollout_abort(rollout=rollout, user=operator, reason="the build is recalled")
    [aborted] = notes(AuditAction.ROLLOUT_ABORTED)
    assert aborted.event_type == EventType.ROLLOUT_ABORTED
    assert aborted.text.endswith("Reason: the build is recalled")
    assert aborted.text.startswith("otto aborted Rollout #")
