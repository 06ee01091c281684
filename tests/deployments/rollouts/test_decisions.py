"""Deciding on a rollout: one approval for every host, bound to its parameters and to what each
host serves (a host without a fresh snapshot is skipped, not approved blind); rejections; pause,
resume and abort, and who may."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.conf import settings
from django.utils import timezone

from controlplane.accounts.models import HostGroup, RoleGrant
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from deployments.models import Rollout, RolloutApproval, RolloutHost
from deployments.rollouts import decisions, requests
from deployments.rollouts.access import RolloutRefused
from deployments.rollouts.choices import RolloutHostStatus, RolloutStatus
from tests import factories as f
from tests.conftest import _user

from .conftest import approved, hosts_of, swap_rollout

pytestmark = pytest.mark.django_db


@pytest.fixture
def rollout(operator, fleet, catalog) -> Rollout:
    return swap_rollout(operator, fleet, catalog["INT4"])


def test_one_approval_binds_what_every_host_serves(rollout, approver, fleet) -> None:
    approved(rollout, approver)
    assert rollout.status == RolloutStatus.APPROVED
    grant = RolloutApproval.objects.get(rollout=rollout)
    assert grant.approver == approver and grant.params_digest == rollout.params_digest
    assert grant.expires_at == grant.created_at + dt.timedelta(
        seconds=settings.APPROVAL_TTL_SECONDS
    )
    assert grant.hosts_digest == requests.rollout_hosts_digest(rollout)
    for rh in RolloutHost.objects.filter(rollout=rollout):
        assert rh.approved_snapshot.host_id == rh.host_id
        assert rh.approved_models == ["kimi-k2.5"] and rh.approved_unit_sha256 == "a" * 64
    event = AuditEvent.objects.get(action=AuditAction.ROLLOUT_APPROVED)
    assert event.actor == approver.username and event.data["hosts_digest"] == grant.hosts_digest
    assert event.data["hosts"] == ["gpu-01", "gpu-02", "gpu-03", "gpu-04"]


def test_the_two_person_rule(fleet, catalog) -> None:
    both = _user("bo", "operator", "approver")
    rollout = swap_rollout(both, fleet, catalog["INT4"])
    with pytest.raises(RolloutRefused, match="the two-person rule") as refused:
        decisions.rollout_approve(rollout=rollout, approver=both, reason="mine")
    assert refused.value.http_status == 403


def test_an_administrator_requesting_cannot_approve_it_either(fleet, catalog, admin_user):
    rollout = swap_rollout(admin_user, fleet, catalog["INT4"])
    with pytest.raises(RolloutRefused, match="two-person"):
        decisions.rollout_approve(rollout=rollout, approver=admin_user, reason="mine")


def test_the_approver_role_on_every_host(rollout, fleet) -> None:
    team = HostGroup.objects.create(name="team-a")
    team.hosts.set([fleet[0].host])
    scoped = _user("ada")
    RoleGrant.objects.create(user=scoped, role="approver", host_group=team)
    with pytest.raises(RolloutRefused, match="gpu-02, gpu-03, gpu-04") as refused:
        decisions.rollout_approve(rollout=rollout, approver=scoped, reason="fine by me")
    assert refused.value.http_status == 403
    assert Rollout.objects.get(pk=rollout.pk).status == RolloutStatus.PENDING_APPROVAL


def test_a_host_without_a_fresh_snapshot_is_skipped_not_approved_blind(
    rollout, approver, fleet
) -> None:
    later = timezone.now() + dt.timedelta(seconds=settings.SNAPSHOT_MAX_AGE_SECONDS + 5)
    with time_machine.travel(later, tick=False):
        f.make_snapshot(fleet[0].host, age=0)  # only gpu-01 was probed since
        approved(rollout, approver)
    rows = hosts_of(rollout)
    assert rows["gpu-01"].status == RolloutHostStatus.PENDING
    for name in ("gpu-02", "gpu-03", "gpu-04"):
        assert rows[name].status == RolloutHostStatus.SKIPPED
        assert "not reviewable when the rollout was approved" in rows[name].skip_reason
        assert "Probe again" in rows[name].skip_reason
    skipped = AuditEvent.objects.filter(action=AuditAction.ROLLOUT_HOST_SKIPPED)
    assert sorted(e.host_label for e in skipped) == ["gpu-02", "gpu-03", "gpu-04"]


def test_with_no_host_to_approve_on_it_is_refused(rollout, approver) -> None:
    later = timezone.now() + dt.timedelta(seconds=settings.SNAPSHOT_MAX_AGE_SECONDS + 5)
    with time_machine.travel(later, tick=False), pytest.raises(RolloutRefused) as refused:
        decisions.rollout_approve(rollout=rollout, approver=approver, reason="ok")
    assert refused.value.http_status == 409 and "Probe them" in refused.value.message
    assert Rollout.objects.get(pk=rollout.pk).status == RolloutStatus.PENDING_APPROVAL
    assert not RolloutHost.objects.exclude(status=RolloutHostStatus.PENDING).exists()


def test_changed_parameters_are_not_approved(rollout, approver) -> None:
    Rollout.objects.filter(pk=rollout.pk).update(max_down=4)
    rollout.refresh_from_db()
    with pytest.raises(RolloutRefused, match="parameters changed"):
        decisions.rollout_approve(rollout=rollout, approver=approver, reason="ok")


def test_a_rejection_never_expires_and_nothing_is_reached(rollout, approver) -> None:
    decisions.rollout_reject(rollout=rollout, approver=approver, reason="not this week")
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.REJECTED and rollout.status_reason == "not this week"
    grant = RolloutApproval.objects.get(rollout=rollout)
    assert grant.expires_at is None
    assert set(RolloutHost.objects.values_list("status", flat=True)) == {"not_reached"}
    with pytest.raises(RolloutRefused, match="is rejected"):
        decisions.rollout_approve(rollout=rollout, approver=approver, reason="changed my mind")


def test_pause_resume_and_abort(rollout, approver, operator, viewer) -> None:
    approved(rollout, approver)
    Rollout.objects.filter(pk=rollout.pk).update(status=RolloutStatus.RUNNING)
    with pytest.raises(RolloutRefused) as refused:
        decisions.rollout_pause(rollout=rollout, user=viewer)
    assert refused.value.http_status == 403
    decisions.rollout_pause(rollout=rollout, user=operator)
    assert Rollout.objects.get(pk=rollout.pk).status == RolloutStatus.PAUSED
    with pytest.raises(RolloutRefused, match="is paused"):
        decisions.rollout_pause(rollout=rollout, user=operator)
    decisions.rollout_resume(rollout=rollout, user=approver)
    row = Rollout.objects.get(pk=rollout.pk)
    assert row.status == RolloutStatus.RUNNING and row.progress_at is not None
    with pytest.raises(RolloutRefused, match="reason"):
        decisions.rollout_abort(rollout=rollout, user=operator, reason=" ")
    decisions.rollout_abort(rollout=rollout, user=operator, reason="the INT4 build is recalled")
    row = Rollout.objects.get(pk=rollout.pk)
    assert row.status == RolloutStatus.ABORTED and row.finished_at is not None
    assert set(RolloutHost.objects.values_list("status", flat=True)) == {"not_reached"}
    actions = list(
        AuditEvent.objects.filter(action__startswith="rollout.")
        .order_by("seq")
        .values_list("action", flat=True)
    )
    assert actions[-3:] == ["rollout.paused", "rollout.resumed", "rollout.aborted"]


def test_another_operator_may_not_stop_someone_elses_rollout(rollout) -> None:
    other = _user("otis", "operator")
    with pytest.raises(RolloutRefused, match="only the rollout's requester"):
        decisions.rollout_abort(rollout=rollout, user=other, reason="mine now")


def test_a_rollout_rolling_back_cannot_be_aborted(rollout, operator) -> None:
    Rollout.objects.filter(pk=rollout.pk).update(status=RolloutStatus.HALTING)
    with pytest.raises(RolloutRefused, match="rolling back the wave that failed") as refused:
        decisions.rollout_abort(rollout=rollout, user=operator, reason="stop it all")
    assert refused.value.http_status == 409
