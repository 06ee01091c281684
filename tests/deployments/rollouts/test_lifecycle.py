"""A rollout's lifecycle and its hosts', as tables: every documented move works with its audit
event, every other is refused, a lost race writes nothing."""

from __future__ import annotations

import itertools

import pytest

from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from deployments.models import Rollout, RolloutHost
from deployments.rollouts import lifecycle
from deployments.rollouts.choices import FINAL_ROLLOUT_STATUSES, RolloutHostStatus, RolloutStatus

from .conftest import swap_rollout

pytestmark = pytest.mark.django_db

ALLOWED = {
    ("pending_approval", "approved"),
    ("pending_approval", "rejected"),
    ("pending_approval", "aborted"),
    ("approved", "running"),
    ("approved", "aborted"),
    ("approved", "failed"),
    ("running", "paused"),
    ("running", "halting"),
    ("running", "succeeded"),
    ("running", "aborted"),
    ("running", "failed"),
    ("paused", "running"),
    ("paused", "halting"),
    ("paused", "aborted"),
    ("paused", "failed"),
    ("halting", "halted"),
}
HOST_ALLOWED = {
    ("pending", "running"),
    ("pending", "skipped"),
    ("pending", "not_reached"),
    ("running", "succeeded"),
    ("running", "failed"),
    ("running", "skipped"),
    ("running", "rolled_back"),
    ("succeeded", "rollback_pending"),
    ("failed", "rollback_pending"),
    ("rollback_pending", "rolling_back"),
    ("rollback_pending", "rollback_failed"),
    ("rolling_back", "rolled_back"),
    ("rolling_back", "rollback_failed"),
}
PAIRS = list(itertools.product(RolloutStatus.values, repeat=2))
HOST_PAIRS = list(itertools.product(RolloutHostStatus.values, repeat=2))


def test_the_tables_are_exactly_the_documented_lifecycles() -> None:
    assert {(s, t) for s, t in PAIRS if lifecycle.allowed(s, t)} == ALLOWED
    assert all(not lifecycle.TRANSITIONS[final] for final in FINAL_ROLLOUT_STATUSES)
    assert {(s, t) for s, t in HOST_PAIRS if lifecycle.host_allowed(s, t)} == HOST_ALLOWED


@pytest.fixture
def rollout(operator, deployment, catalog) -> Rollout:
    return swap_rollout(operator, [deployment], catalog["INT4"])


@pytest.mark.parametrize(("source", "target"), PAIRS)
def test_each_move_of_a_rollout(rollout, source, target) -> None:
    Rollout.objects.filter(pk=rollout.pk).update(status=source)
    rollout.status = source
    if (source, target) not in ALLOWED:
        with pytest.raises(lifecycle.IllegalTransition):
            lifecycle.rollout_transition(
                rollout=rollout, source=source, target=target, action=AuditAction.ROLLOUT_PAUSED
            )
        assert Rollout.objects.get(pk=rollout.pk).status == source
        return
    assert lifecycle.rollout_transition(
        rollout=rollout, source=source, target=target, action=AuditAction.ROLLOUT_PAUSED,
        reason="because",
    )  # fmt: skip
    row = Rollout.objects.get(pk=rollout.pk)
    assert row.status == target == rollout.status and row.status_reason == "because"
    event = AuditEvent.objects.get(action=AuditAction.ROLLOUT_PAUSED)
    assert event.correlation_id == rollout.correlation_id
    assert event.target_type == "deployments.rollout" and event.target_id == str(rollout.pk)
    assert (row.finished_at is not None) == (target in FINAL_ROLLOUT_STATUSES)


@pytest.mark.parametrize(("source", "target"), HOST_PAIRS)
def test_each_move_of_a_host(rollout, source, target) -> None:
    rh = RolloutHost.objects.select_related("host", "rollout").filter(rollout=rollout).first()
    RolloutHost.objects.filter(pk=rh.pk).update(status=source)
    rh.status = source
    if (source, target) not in HOST_ALLOWED:
        with pytest.raises(lifecycle.IllegalTransition):
            lifecycle.rollout_host_transition(rollout_host=rh, source=source, target=target)
        return
    assert lifecycle.rollout_host_transition(
        rollout_host=rh, source=source, target=target, action=AuditAction.ROLLOUT_HOST_SKIPPED
    )
    assert RolloutHost.objects.get(pk=rh.pk).status == target
    event = AuditEvent.objects.get(action=AuditAction.ROLLOUT_HOST_SKIPPED)
    assert event.host_label == rh.host.name and event.data["host"] == rh.host.name


def test_a_lost_race_writes_nothing(rollout) -> None:
    first, second = Rollout.objects.get(pk=rollout.pk), Rollout.objects.get(pk=rollout.pk)
    assert lifecycle.rollout_transition(
        rollout=first, source="pending_approval", target="rejected",
        action=AuditAction.ROLLOUT_REJECTED,
    )  # fmt: skip
    assert not lifecycle.rollout_transition(
        rollout=second, source="pending_approval", target="approved",
        action=AuditAction.ROLLOUT_APPROVED,
    )  # fmt: skip
    assert Rollout.objects.get(pk=rollout.pk).status == RolloutStatus.REJECTED
    assert not AuditEvent.objects.filter(action=AuditAction.ROLLOUT_APPROVED).exists()
