"""A rollout that drains: which hook and deadline it may carry (checked as a change request's),
that its approval is bound to them, and that each host's change and rollback carries them.
The jobs that drain are tests/deployments/rollouts/test_rollout_drain_jobs.py."""

from __future__ import annotations

import dataclasses

import pytest
from django.urls import reverse

from controlplane.audit.models import AuditEvent
from deployments import kinds
from deployments.choices import ChangeKind, ChangeStatus, DrainHookKind
from deployments.models import DrainHook, Rollout, RolloutHost
from deployments.rollouts import decisions, orchestrator, requests, turns
from deployments.rollouts.access import RolloutRefused
from deployments.rollouts.choices import RolloutHostStatus, RolloutStatus

from .conftest import approved, end_change, fresh, hosts_of, swap_rollout, take_turns

pytestmark = pytest.mark.django_db
H = RolloutHostStatus


@pytest.fixture
def hook(db) -> DrainHook:
    return DrainHook.objects.create(
        name="lb",
        kind=DrainHookKind.COMMAND,
        drain_command="/usr/local/bin/lb-drain out --backend {host}",
        undrain_command="/usr/local/bin/lb-drain in --backend {host}",
    )


def restart_rollout(operator, fleet, **kwargs) -> Rollout:
    kwargs.setdefault("wave_size", 2)
    kwargs.setdefault("max_down", 2)
    return requests.rollout_create(
        user=operator, kind=ChangeKind.RESTART, reason="pick up the new driver",
        hosts=[d.host for d in fleet], **kwargs,
    )  # fmt: skip


# --- what it may carry ----------------------------------------------------------------------


def test_a_rollout_keeps_its_hook_by_name_and_by_what_it_runs(operator, fleet, hook) -> None:
    rollout = restart_rollout(operator, fleet, drain_hook=hook, drain_deadline_seconds=120)
    assert (rollout.drain_hook, rollout.drain_hook_name) == (hook, "lb")
    assert rollout.drain_hook_digest == hook.digest()
    assert rollout.drain_deadline_seconds == 120
    requested = AuditEvent.objects.get(action="rollout.requested")
    assert requested.data["drain"] == {
        "hook": hook.pk, "hook_name": "lb", "hook_digest": hook.digest(), "deadline_seconds": 120,
    }  # fmt: skip


def test_the_deadline_defaults_as_a_change_requests_does(operator, fleet, hook) -> None:
    assert restart_rollout(operator, fleet, drain_hook=hook).drain_deadline_seconds == 300


def test_a_kind_that_may_not_drain_is_refused(operator, fleet, hook, monkeypatch) -> None:
    # Every kind a rollout carries drops requests in flight, so each may drain today; the rule
    # is the kind's declaration, as for a change request.
    assert all(kinds.spec(k).may_drain for k in (ChangeKind.RESTART, ChangeKind.MODEL_SWAP))
    restart = dataclasses.replace(kinds.KINDS[ChangeKind.RESTART], may_drain=False)
    monkeypatch.setitem(kinds.KINDS, ChangeKind.RESTART.value, restart)
    with pytest.raises(RolloutRefused, match="A restart does not drain") as refused:
        restart_rollout(operator, fleet, drain_hook=hook)
    assert set(refused.value.details["fields"]) == {"drain_hook"}
    assert refused.value.http_status == 400
    assert not Rollout.objects.exists()


def test_a_disabled_hook_or_a_deadline_out_of_bounds_is_refused(operator, fleet, hook) -> None:
    with pytest.raises(RolloutRefused, match="drain deadline is 5 to 3600 seconds") as refused:
        restart_rollout(operator, fleet, drain_hook=hook, drain_deadline_seconds=4)
    assert set(refused.value.details["fields"]) == {"drain_deadline_seconds"}
    with pytest.raises(RolloutRefused, match="needs a drain hook"):
        restart_rollout(operator, fleet, drain_deadline_seconds=60)
    DrainHook.objects.filter(pk=hook.pk).update(enabled=False)
    hook.refresh_from_db()
    with pytest.raises(RolloutRefused, match="The drain hook lb is disabled"):
        restart_rollout(operator, fleet, drain_hook=hook)
    assert not Rollout.objects.exists()


# --- what the approval binds to -------------------------------------------------------------


def test_the_params_digest_covers_the_hook_and_its_deadline(operator, fleet, hook) -> None:
    rollout = restart_rollout(operator, fleet, drain_hook=hook, drain_deadline_seconds=120)
    digest = requests.rollout_params_digest(rollout)
    assert digest == rollout.params_digest
    for field, value in (
        ("drain_deadline_seconds", 600),
        ("drain_hook_name", "other-lb"),
        ("drain_hook_digest", "0" * 64),
    ):
        changed = Rollout.objects.get(pk=rollout.pk)
        setattr(changed, field, value)
        assert requests.rollout_params_digest(changed) != digest, field


def test_a_rollout_that_does_not_drain_keeps_the_digest_it_had(operator, fleet) -> None:
    # Approvals given before rollouts could drain stay valid: no drain, no key in the digest.
    rollout = restart_rollout(operator, fleet)
    assert rollout.params_digest == requests.rollout_params_digest(rollout)
    with_hook = Rollout.objects.get(pk=rollout.pk)
    with_hook.drain_hook_digest = "0" * 64
    assert requests.rollout_params_digest(with_hook) != rollout.params_digest


def test_a_hook_edited_after_the_request_cannot_be_approved(
    operator, approver, fleet, hook
) -> None:
    rollout = restart_rollout(operator, fleet, drain_hook=hook)
    DrainHook.objects.filter(pk=hook.pk).update(drain_command="/usr/local/bin/lb-drain wipe")
    with pytest.raises(RolloutRefused, match="lb was changed after the rollout was requested"):
        decisions.rollout_approve(rollout=rollout, approver=approver, reason="looks right")
    assert Rollout.objects.get(pk=rollout.pk).status == RolloutStatus.PENDING_APPROVAL


def test_a_hook_disabled_after_the_approval_stops_the_rollout(
    operator, approver, fleet, hook
) -> None:
    rollout = approved(restart_rollout(operator, fleet, drain_hook=hook), approver)
    DrainHook.objects.filter(pk=hook.pk).update(enabled=False)
    orchestrator.rollout_advance(rollout_id=rollout.pk)
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.FAILED
    assert rollout.status_reason == "stopped: the drain hook lb it was requested with was disabled"
    assert not any(rh.change_id for rh in hosts_of(rollout).values())


# --- each host's change, and its rollback ---------------------------------------------------


def test_each_change_and_each_rollback_drains_with_the_rollouts_hook(
    operator, approver, fleet, catalog, hook
) -> None:
    rollout = approved(
        swap_rollout(
            operator, fleet[:3], catalog["INT4"], drain_hook=hook, drain_deadline_seconds=90
        ),
        approver,
    )
    planned = {
        "hook": hook.pk, "hook_name": "lb", "hook_digest": hook.digest(), "deadline_seconds": 90,
    }  # fmt: skip
    [canary] = take_turns(rollout)
    assert canary.change.params["drain"] == planned
    end_change(canary.change)
    second, third = take_turns(rollout)
    for rh in (second, third):
        assert rh.change.params["drain"] == planned
    end_change(second.change)
    end_change(third.change, coherent=False)
    take_turns(rollout)  # wave 2 halts; its changed hosts are rolled back, drained first
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.HALTING, rollout.status_reason
    backs = [rh for rh in hosts_of(rollout).values() if rh.rollback_change_id]
    assert backs and all(rh.status == H.ROLLING_BACK for rh in backs)
    for rh in backs:
        back = rh.rollback_change
        assert back.kind == ChangeKind.ROLLBACK and back.status == ChangeStatus.QUEUED
        assert back.params["drain"] == planned


def test_a_rollback_whose_hook_was_deleted_is_reported_not_run_without_it(
    operator, approver, fleet, catalog, hook
) -> None:
    rollout = approved(
        swap_rollout(operator, fleet[:3], catalog["INT4"], drain_hook=hook), approver
    )
    [canary] = take_turns(rollout)
    end_change(canary.change)
    second, third = take_turns(rollout)
    end_change(second.change)
    end_change(third.change, coherent=False)
    # The wave halts and its rollback turns are claimed; the hook is deleted before they run.
    orchestrator.rollout_sync(rollout_id=rollout.pk)
    claims = orchestrator.rollout_decide(rollout_id=rollout.pk)
    assert claims and all(rollback for _, _, rollback in claims)
    hook.delete()
    for rollout_host_id, token, _ in claims:
        rh = RolloutHost.objects.select_related("host").get(pk=rollout_host_id)
        turns.rollback_turn_on(
            rollout_host_id=rollout_host_id, token=token, snapshot=fresh(rh.host)
        )
    rolled = [hosts_of(rollout)[rh.host.name] for rh in (second, third)]
    assert [rh.status for rh in rolled] == [H.ROLLBACK_FAILED, H.ROLLBACK_FAILED]
    assert all(rh.rollback_change_id is None for rh in rolled)
    assert all(
        "the drain hook lb it was requested with was deleted" in rh.skip_reason for rh in rolled
    )


# --- the page and the API -------------------------------------------------------------------


def form_data(fleet, **extra):
    return {
        "kind": "restart", "hosts": [d.host.pk for d in fleet[:2]], "wave_size": 1,
        "wave_unit": "hosts", "max_down": 1, "benchmark_margin_pct": 10,
        "progress_deadline_minutes": 30, "reason": "pick up the new driver", **extra,
    }  # fmt: skip


def test_the_form_offers_the_enabled_hooks_and_requests_a_drained_rollout(
    client, operator, fleet, hook
) -> None:
    DrainHook.objects.create(
        name="old-lb", kind=DrainHookKind.COMMAND, enabled=False,
        drain_command="/usr/bin/true", undrain_command="/usr/bin/true",
    )  # fmt: skip
    client.force_login(operator)
    page = client.get(reverse("rollouts:create")).content.decode()
    assert 'name="drain_hook"' in page and ">lb</option>" in page and "old-lb" not in page
    response = client.post(
        reverse("rollouts:create"),
        form_data(fleet, drain_hook=hook.pk, drain_deadline_seconds=45),
    )
    assert response.status_code == 302, response.content.decode()
    rollout = Rollout.objects.get()
    assert (rollout.drain_hook_name, rollout.drain_deadline_seconds) == ("lb", 45)
    detail = client.get(response["Location"]).content.decode()
    assert "<code>lb</code>" in detail and "up to 45 s" in detail


def test_the_api_takes_the_hook_by_name_and_refuses_a_kind_that_may_not_drain(
    client, operator, fleet, hook, monkeypatch
) -> None:
    client.force_login(operator)
    body = {
        "kind": "restart", "reason": "pick up the new driver", "hosts": ["gpu-01", "gpu-02"],
        "wave_size": 1, "max_down": 1, "drain_hook": "lb", "drain_deadline_seconds": 60,
    }  # fmt: skip
    restart = dataclasses.replace(kinds.KINDS[ChangeKind.RESTART], may_drain=False)
    with monkeypatch.context() as patched:
        patched.setitem(kinds.KINDS, ChangeKind.RESTART.value, restart)
        refused = client.post("/api/v1/rollouts/", body, content_type="application/json")
    assert refused.status_code == 400, refused.content
    assert "does not drain" in refused.json()["detail"]
    unknown = client.post(
        "/api/v1/rollouts/", {**body, "drain_hook": "nope"}, content_type="application/json"
    )
    assert unknown.status_code == 400 and "drain_hook" in unknown.json()
    response = client.post("/api/v1/rollouts/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["drain_hook"] == "lb"
    assert response.json()["drain_deadline_seconds"] == 60
