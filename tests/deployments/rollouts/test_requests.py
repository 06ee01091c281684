"""Requesting a rollout: what it may carry, which hosts (each seen and held with the operator
role), waves, one open rollout per host, and the digest its approval binds to."""

from __future__ import annotations

import pytest

from controlplane.accounts.models import HostGroup, RoleGrant
from controlplane.accounts.roles import scope_forget
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from deployments.models import Rollout, RolloutHost
from deployments.rollouts import requests
from deployments.rollouts.access import RolloutRefused
from deployments.rollouts.choices import RolloutStatus, WaveUnit
from tests.conftest import _user

from .conftest import swap_rollout

pytestmark = pytest.mark.django_db


def test_a_swap_over_a_host_group_in_waves(operator, fleet, catalog) -> None:
    group = HostGroup.objects.create(name="prod")
    group.hosts.set([d.host for d in reversed(fleet)])
    rollout = requests.rollout_create(
        user=operator, kind="model_swap", model=catalog["INT4"], reason="INT4 is faster",
        host_group=group, wave_size=50, wave_unit=WaveUnit.PERCENT, max_down=2,
    )  # fmt: skip
    assert rollout.status == RolloutStatus.PENDING_APPROVAL
    assert rollout.host_group_name == "prod" and rollout.waves == 3
    rows = list(RolloutHost.objects.filter(rollout=rollout).order_by("position"))
    # Hosts in name order, the first alone as the canary, then 50 % of 4 = 2 per wave.
    assert [(r.host.name, r.wave) for r in rows] == [
        ("gpu-01", 0), ("gpu-02", 1), ("gpu-03", 1), ("gpu-04", 2),
    ]  # fmt: skip
    assert [r.deployment_id for r in rows] == [d.pk for d in fleet]
    event = AuditEvent.objects.get(action=AuditAction.ROLLOUT_REQUESTED)
    assert event.actor == operator.username and event.correlation_id == rollout.correlation_id
    assert event.data["hosts"] == ["gpu-01", "gpu-02", "gpu-03", "gpu-04"]
    assert event.data["params_digest"] == rollout.params_digest
    assert rollout.params_digest == requests.rollout_params_digest(rollout)


def test_the_digest_changes_with_what_the_approval_binds(operator, fleet, catalog) -> None:
    rollout = swap_rollout(operator, fleet, catalog["INT4"])
    before = rollout.params_digest
    Rollout.objects.filter(pk=rollout.pk).update(max_down=4)
    rollout.refresh_from_db()
    assert requests.rollout_params_digest(rollout) != before


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"kind": "stop"}, "not 'stop'"),
        ({"kind": "rollback"}, "not 'rollback'"),
        ({"model": None}, "needs the model"),
        ({"kind": "restart"}, "Only a model swap takes a model"),
        ({"reason": "   "}, "reason"),
        ({"max_down": 0}, "max_down"),
        ({"wave_size": 0}, "wave_size"),
        ({"wave_size": 150, "wave_unit": WaveUnit.PERCENT}, "at most 100"),
        ({"progress_deadline_seconds": 5}, "progress_deadline_seconds"),
        ({"benchmark_margin_pct": 95}, "benchmark_margin_pct"),
        ({"extra_args": ["--port", "9000"]}, "extra arguments"),
        ({"hosts": []}, "at least one host"),
    ],
)
def test_what_a_rollout_may_not_carry_is_refused_in_words(
    operator, fleet, catalog, arguments, words
) -> None:
    base = {
        "user": operator, "kind": "model_swap", "model": catalog["INT4"], "reason": "faster",
        "hosts": [d.host for d in fleet], "wave_size": 1, "max_down": 1,
    }  # fmt: skip
    with pytest.raises(RolloutRefused, match=words) as refused:
        requests.rollout_create(**{**base, **arguments})
    assert refused.value.http_status == 400
    assert not Rollout.objects.exists()


def test_a_host_group_and_a_list_are_not_both_taken(operator, fleet, catalog) -> None:
    group = HostGroup.objects.create(name="prod")
    with pytest.raises(RolloutRefused, match="either a host group or a list"):
        swap_rollout(operator, fleet, catalog["INT4"], host_group=group)


def test_it_needs_the_operator_role_on_every_host(fleet, catalog, viewer) -> None:
    team = HostGroup.objects.create(name="team-a")
    team.hosts.set([fleet[0].host, fleet[1].host])
    scoped = _user("tess")
    RoleGrant.objects.create(user=scoped, role="operator", host_group=team)
    swap_rollout(scoped, fleet[:2], catalog["INT4"])  # on team-a's own hosts: fine
    everyone_sees = HostGroup.objects.create(name="all")
    everyone_sees.hosts.set([d.host for d in fleet])
    RoleGrant.objects.create(user=scoped, role="viewer", host_group=everyone_sees)
    scope_forget(scoped)  # as a new request would read it
    with pytest.raises(RolloutRefused, match="gpu-03, gpu-04") as refused:
        swap_rollout(scoped, fleet[2:], catalog["INT4"])
    assert refused.value.http_status == 403
    with pytest.raises(RolloutRefused, match="operator role") as refused:
        swap_rollout(viewer, fleet, catalog["INT4"])
    assert refused.value.http_status == 403


def test_hosts_outside_the_requesters_groups_are_not_named(fleet, catalog) -> None:
    team = HostGroup.objects.create(name="team-a")
    team.hosts.set([fleet[0].host])
    scoped = _user("tess")
    RoleGrant.objects.create(user=scoped, role="operator", host_group=team)
    with pytest.raises(RolloutRefused) as refused:
        swap_rollout(scoped, fleet, catalog["INT4"])
    assert refused.value.http_status == 404
    assert "gpu-0" not in refused.value.message


def test_a_host_is_in_one_open_rollout_at_a_time(operator, fleet, catalog) -> None:
    first = swap_rollout(operator, fleet[:2], catalog["INT4"])
    with pytest.raises(RolloutRefused, match=f"gpu-02 \\(rollout #{first.pk}\\)") as refused:
        swap_rollout(operator, fleet[1:], catalog["INT4"])
    assert refused.value.http_status == 409
    Rollout.objects.filter(pk=first.pk).update(status=RolloutStatus.ABORTED)
    swap_rollout(operator, fleet[1:], catalog["INT4"])


def test_a_host_with_two_deployments_needs_the_unit_named(operator, fleet, catalog) -> None:
    from deployments.models import Deployment

    Deployment.objects.create(
        host=fleet[0].host, unit="vllm-other.service", model=catalog["NVFP4"], port=8001
    )
    with pytest.raises(RolloutRefused, match="gpu-01 has 2 deployments: name the unit"):
        swap_rollout(operator, fleet, catalog["INT4"])
    rollout = swap_rollout(operator, fleet, catalog["INT4"], unit="vllm-kimi-k25.service")
    assert RolloutHost.objects.get(rollout=rollout, host=fleet[0].host).deployment == fleet[0]
