"""A host's turn: what makes it no longer what the rollout was approved for."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group

from deployments.models import Rollout, RolloutHost
from deployments.rollouts import orchestrator, turns
from deployments.rollouts.choices import RolloutHostStatus
from deployments.services import host_health_update
from tests import factories as f

from .conftest import approved, hosts_of, swap_rollout, take_turns

pytestmark = pytest.mark.django_db
H = RolloutHostStatus


@pytest.fixture
def rollout(operator, approver, fleet, catalog) -> Rollout:
    return approved(swap_rollout(operator, fleet, catalog["INT4"]), approver)


def test_another_unit_file_is_not_what_was_approved(rollout) -> None:
    state = f.parsed_state()
    state["deployments"][f.UNIT]["unit_file_sha256"] = "b" * 64
    [canary] = take_turns_with(rollout, state)
    assert canary.status == H.SKIPPED
    assert canary.skip_reason == (
        "its unit file changed since the rollout was approved (sha256 aaaaaaaaaaaa then, "
        "bbbbbbbbbbbb now)"
    )


def take_turns_with(rollout: Rollout, parsed: dict[str, Any]) -> list[RolloutHost]:
    """take_turns, on a snapshot of exactly `parsed`."""
    claims = orchestrator.rollout_decide(rollout_id=rollout.pk)
    for rollout_host_id, token, _ in claims:
        rh = RolloutHost.objects.select_related("host").get(pk=rollout_host_id)
        snapshot = f.make_snapshot(rh.host, age=1.0, parsed=parsed)
        host_health_update(host=rh.host)
        turns.host_turn_on(rollout_host_id=rollout_host_id, token=token, snapshot=snapshot)
    return [RolloutHost.objects.get(pk=c[0]) for c in claims]


def test_a_requester_who_lost_the_operator_role_changes_nothing(rollout, operator) -> None:
    operator.groups.remove(Group.objects.get(name="operator"))
    [canary] = take_turns(rollout)
    assert canary.status == H.SKIPPED
    assert canary.skip_reason == "the requester (otto) no longer holds the operator role here"


def test_an_approver_who_lost_the_role_covers_no_more_hosts(rollout, approver) -> None:
    approver.groups.remove(Group.objects.get(name="approver"))
    [canary] = take_turns(rollout)
    assert canary.skip_reason == "the approver (anna) no longer holds the approver role here"
    assert hosts_of(rollout)["gpu-01"].change is None
