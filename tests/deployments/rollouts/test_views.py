"""The rollout pages: the form, the review and decisions, the live page and its polling, and a
rollout naming a host outside someone's groups kept from them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from controlplane.accounts.models import HostGroup, RoleGrant
from deployments.models import Rollout, RolloutHost
from deployments.rollouts.choices import RolloutStatus
from tests.conftest import _user

from .conftest import approved, end_change, swap_rollout, take_turns

pytestmark = pytest.mark.django_db


def test_an_operator_requests_a_rollout_from_the_form(client, operator, fleet, catalog) -> None:
    client.force_login(operator)
    page = client.get(reverse("rollouts:create")).content.decode()
    assert page.count('name="hosts"') == 4 and "gpu-04" in page
    response = client.post(
        reverse("rollouts:create"),
        {
            "kind": "model_swap", "model": catalog["INT4"].pk,
            "hosts": [d.host.pk for d in fleet[:3]], "wave_size": 2, "wave_unit": "hosts",
            "max_down": 2, "benchmark_margin_pct": 10, "progress_deadline_minutes": 30,
            "reason": "INT4 serves more tokens",
        },
    )  # fmt: skip
    rollout = Rollout.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("rollouts:detail", args=[rollout.pk])
    assert rollout.progress_deadline_seconds == 1800 and rollout.waves == 2
    assert RolloutHost.objects.filter(rollout=rollout).count() == 3


def test_a_refused_request_is_said_on_the_form(client, operator, fleet, catalog) -> None:
    client.force_login(operator)
    response = client.post(
        reverse("rollouts:create"),
        {
            "kind": "restart", "model": catalog["INT4"].pk, "hosts": [fleet[0].host.pk],
            "wave_size": 1, "wave_unit": "hosts", "max_down": 1, "benchmark_margin_pct": 10,
            "progress_deadline_minutes": 30, "reason": "pick up the driver",
        },
    )  # fmt: skip
    assert response.status_code == 400
    assert "Only a model swap takes a model" in response.content.decode()
    assert not Rollout.objects.exists()


def test_the_approver_reviews_each_host_and_approves_once(
    client, operator, approver, fleet, catalog
) -> None:
    rollout = swap_rollout(operator, fleet, catalog["INT4"])
    client.force_login(approver)
    page = client.get(reverse("rollouts:detail", args=[rollout.pk])).content.decode()
    assert 'id="review-hosts"' in page and page.count("kimi-k2.5") >= 4
    assert "Approve the rollout" in page
    response = client.post(
        reverse("rollouts:approve", args=[rollout.pk]), {"reason": "the canary will tell"}
    )
    assert response.status_code == 302
    assert Rollout.objects.get(pk=rollout.pk).status == RolloutStatus.APPROVED


def test_an_operator_cannot_approve_and_gets_a_403(client, operator, fleet, catalog) -> None:
    rollout = swap_rollout(operator, fleet, catalog["INT4"])
    client.force_login(operator)
    response = client.post(reverse("rollouts:approve", args=[rollout.pk]), {"reason": "mine"})
    assert response.status_code == 403
    assert "approver role" in response.content.decode()


def test_the_live_page_shows_each_host_and_stops_polling_when_done(
    client, operator, approver, fleet, catalog
) -> None:
    rollout = approved(swap_rollout(operator, fleet[:1], catalog["INT4"]), approver)
    [canary] = take_turns(rollout)
    client.force_login(operator)
    live = reverse("rollouts:detail", args=[rollout.pk]) + "?fragment=live"
    running = client.get(live, headers={"HX-Request": "true"})
    assert running.status_code == 200
    body = running.content.decode()
    assert 'hx-trigger="every 2s"' in body
    assert reverse("deployments:change", args=[canary.change_id]) in body
    change_page = client.get(reverse("deployments:change", args=[canary.change_id]))
    assert f'href="{reverse("rollouts:detail", args=[rollout.pk])}"' in change_page.content.decode()
    end_change(canary.change)
    take_turns(rollout)
    done = client.get(live, headers={"HX-Request": "true"})
    assert done.status_code == 286  # htmx stops polling
    assert "hx-trigger" not in done.content.decode()
    assert "succeeded" in done.content.decode()


def test_a_rollout_over_a_host_outside_my_groups_is_not_found(
    client, operator, fleet, catalog
) -> None:
    rollout = swap_rollout(operator, fleet, catalog["INT4"])
    team = HostGroup.objects.create(name="team-a")
    team.hosts.set([fleet[0].host])
    scoped = _user("tess")
    RoleGrant.objects.create(user=scoped, role="viewer", host_group=team)
    client.force_login(scoped)
    assert client.get(reverse("rollouts:detail", args=[rollout.pk])).status_code == 404
    listed = client.get(reverse("rollouts:list")).content.decode()
    assert f"#{rollout.pk}" not in listed and "No rollout yet." in listed
