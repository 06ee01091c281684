"""The approvals page lists rollouts waiting for approval beside the changes: one approval each,
for every host of the rollout; a rollout with a host the person does not see is not listed."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from controlplane.accounts.models import HostGroup, RoleGrant
from tests.conftest import _user

from .conftest import approved, swap_rollout

pytestmark = pytest.mark.django_db


def waiting(client, user) -> list[int]:
    client.force_login(user)
    body = client.get(reverse("deployments:approvals")).content.decode()
    table = body[body.index('id="rollouts-waiting"') :]
    return [int(pk) for pk in re.findall(r">rollout #(\d+)</a>", table)]


def test_rollouts_waiting_for_approval_are_listed_oldest_first(
    client, operator, approver, fleet, catalog
):
    first = swap_rollout(operator, fleet[:2], catalog["INT4"])
    second = swap_rollout(operator, fleet[2:], catalog["INT4"])
    assert waiting(client, approver) == [first.pk, second.pk]
    body = client.get(reverse("deployments:approvals")).content.decode()
    assert "2 rollouts waiting" in body and "2 hosts, " in body
    assert "model swap to moonshotai/Kimi-K2.5 (INT4)" in body

    approved(first, approver)
    assert waiting(client, approver) == [second.pk]


def test_nobody_sees_a_rollout_with_a_host_outside_their_scope(client, operator, fleet, catalog):
    rollout = swap_rollout(operator, fleet[:2], catalog["INT4"])
    group = HostGroup.objects.create(name="team-a")
    group.hosts.add(fleet[0].host)  # the rollout's other host is not the team's
    someone = _user("tina")
    RoleGrant.objects.create(user=someone, role="approver", host_group=group)
    assert waiting(client, someone) == []
    group.hosts.add(fleet[1].host)
    assert waiting(client, someone) == [rollout.pk]
