"""The rules that refuse or allow a change, each of them (no SSH needed to refuse)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.db import IntegrityError, transaction
from django.utils import timezone

from controlplane.audit.models import AuditEvent
from deployments import services
from deployments.choices import ChangeStatus
from deployments.execution import runner
from deployments.models import Approval, ChangeRequest, HostLease
from hosts import services as host_services
from hosts.probe import ProbeOutcome
from tests import factories as f

pytestmark = pytest.mark.django_db


def swap(operator, deployment, snapshot, model, **kwargs):
    return services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", snapshot=snapshot,
        reason="INT4 build is faster", model=model, **kwargs,
    )  # fmt: skip


def restart(operator, deployment, snapshot, **kwargs):
    return services.change_request_create(
        user=operator, deployment=deployment, kind="restart", snapshot=snapshot,
        reason="pick up the patched driver", **kwargs,
    )  # fmt: skip


def test_a_model_swap_on_a_fresh_snapshot_waits_for_approval(operator, deployment, host, catalog):
    snapshot = f.make_snapshot(host)
    change = swap(operator, deployment, snapshot, catalog["INT4"])
    assert change.status == ChangeStatus.PENDING_APPROVAL
    assert change.target_revision.model == catalog["INT4"]
    assert "/models/moonshotai/Kimi-K2.5-INT4" in change.target_revision.unit_text
    event = AuditEvent.objects.get(action="change.requested")
    assert event.snapshot_id == snapshot.pk
    assert event.snapshot_digest == snapshot.digest
    assert 4 < event.snapshot_age_seconds < 60
    assert event.correlation_id == change.correlation_id


def test_a_restart_needs_no_approval_and_is_queued(operator, deployment, host):
    change = restart(operator, deployment, f.make_snapshot(host))
    assert change.status == ChangeStatus.QUEUED
    assert not change.needs_approval


def test_it_refuses_a_stale_snapshot_at_request(operator, deployment, host, settings):
    snapshot = f.make_snapshot(host, age=settings.SNAPSHOT_MAX_AGE_SECONDS + 1)
    with pytest.raises(services.ChangeRefused) as refused:
        restart(operator, deployment, snapshot)
    assert refused.value.code == "stale"
    assert "the limit is 300 s" in refused.value.message
    assert refused.value.details["age_seconds"] > 300
    assert not ChangeRequest.objects.exists()


def test_it_refuses_another_hosts_snapshot(operator, deployment):
    other = f.make_host("gpu-02", port=2202)
    with pytest.raises(services.ChangeRefused, match="is of gpu-02, not gpu-01"):
        restart(operator, deployment, f.make_snapshot(other))


def test_it_refuses_a_snapshot_that_is_not_ok(operator, deployment, host):
    with pytest.raises(services.ChangeRefused, match="has status unreachable"):
        restart(operator, deployment, f.make_snapshot(host, status="unreachable"))
    # A partial one backs a restart only once what is unknown is acknowledged.
    with pytest.raises(services.ChangeRefused, match="Acknowledge what is unknown"):
        restart(operator, deployment, f.make_snapshot(host, status="partial"))


def test_it_refuses_a_superseded_snapshot_that_differs(operator, deployment, host):
    older = f.make_snapshot(host, age=30)
    f.make_snapshot(host, age=10, parsed=f.parsed_state(main_pid=51234))
    with pytest.raises(services.ChangeRefused, match="superseded") as refused:
        restart(operator, deployment, older)
    assert refused.value.code == "stale"


def test_a_later_snapshot_that_is_materially_the_same_does_not_supersede(
    operator, deployment, host
):
    older = f.make_snapshot(host, age=30)
    f.make_snapshot(host, age=10, parsed=f.parsed_state(used_mib=97000))  # memory moves
    assert restart(operator, deployment, older).status == ChangeStatus.QUEUED


def test_a_model_that_cannot_fit_is_refused(operator, deployment, host, catalog):
    with pytest.raises(services.ChangeRefused, match="does not fit") as refused:
        swap(operator, deployment, f.make_snapshot(host), catalog["FP8"])
    assert "128.8 GiB of weights per GPU" in refused.value.message
    assert not ChangeRequest.objects.exists()


def test_a_busy_server_needs_an_explicit_acknowledgement(operator, deployment, host):
    snapshot = f.make_snapshot(host, parsed=f.parsed_state(running=3))
    with pytest.raises(services.ChangeRefused, match="3 requests in flight") as refused:
        restart(operator, deployment, snapshot)
    assert refused.value.details["needs_acknowledgement"]
    change = restart(operator, deployment, snapshot, acknowledge_busy=True)
    assert change.busy_acknowledged
    event = AuditEvent.objects.get(action="change.busy_acknowledged")
    assert event.data["inflight"] == 3.0
    assert event.actor == operator.username


def test_a_second_job_on_the_same_host_is_refused(operator, deployment, host):
    snapshot = f.make_snapshot(host)
    first = restart(operator, deployment, snapshot)
    with pytest.raises(services.ChangeRefused, match=f"change #{first.pk} is queued"):
        restart(operator, deployment, snapshot)


def test_the_database_itself_allows_one_active_job_per_host(operator, deployment, host):
    first = restart(operator, deployment, f.make_snapshot(host))
    duplicate = ChangeRequest(
        host=host, deployment=deployment, kind="stop", snapshot=first.snapshot,
        params_digest="x", reason="r", requested_by_name="x", needs_approval=False,
        status=ChangeStatus.RUNNING, correlation_id="c",
    )  # fmt: skip
    with pytest.raises(IntegrityError), transaction.atomic():
        duplicate.save()


def test_viewers_and_approvers_cannot_request(viewer, approver, deployment, host):
    snapshot = f.make_snapshot(host)
    for user in (viewer, approver):
        with pytest.raises(services.ChangeRefused) as refused:
            restart(user, deployment, snapshot)
        assert refused.value.code == "forbidden"
    assert not ChangeRequest.objects.exists()


def test_a_requester_cannot_approve_their_own_request(deployment, host, catalog, operator):
    from controlplane.accounts.roles import ensure_role_groups, scope_forget

    operator.groups.add(ensure_role_groups()["approver"])
    scope_forget(operator)
    change = swap(operator, deployment, f.make_snapshot(host), catalog["INT4"])
    with pytest.raises(services.ChangeRefused, match="two-person rule") as refused:
        services.change_request_approve(
            change=change,
            approver=operator,
            snapshot=f.make_snapshot(host),
            reason="reviewed the snapshot",
        )
    assert refused.value.code == "forbidden"
    change.refresh_from_db()
    assert change.status == ChangeStatus.PENDING_APPROVAL


def test_admins_are_held_to_the_two_person_rule_too(deployment, host, catalog, admin_user):
    change = swap(admin_user, deployment, f.make_snapshot(host), catalog["INT4"])
    with pytest.raises(services.ChangeRefused, match="two-person rule"):
        services.change_request_approve(
            change=change,
            approver=admin_user,
            snapshot=f.make_snapshot(host),
            reason="reviewed the snapshot",
        )


def test_break_glass_lets_an_admin_past_with_a_reason_and_a_red_flag(
    deployment, host, catalog, admin_user, operator
):
    change = swap(operator, deployment, f.make_snapshot(host), catalog["INT4"])
    with pytest.raises(services.ChangeRefused, match="at least 10 visible characters"):
        services.change_request_break_glass(
            change=change, admin=admin_user, snapshot=f.make_snapshot(host), reason="now"
        )
    with pytest.raises(services.ChangeRefused, match="administrator"):
        services.change_request_break_glass(
            change=change, admin=operator, snapshot=f.make_snapshot(host), reason="x" * 20
        )
    services.change_request_break_glass(
        change=change, admin=admin_user, snapshot=f.make_snapshot(host),
        reason="the on-call approver is unreachable and the model is broken",
    )  # fmt: skip
    change.refresh_from_db()
    assert change.status == ChangeStatus.QUEUED
    event = AuditEvent.objects.get(action="change.break_glass")
    assert event.data["alert"] is True
    assert event.actor == admin_user.username


def test_approval_on_a_stale_snapshot_is_refused(operator, approver, deployment, host, catalog):
    change = swap(operator, deployment, f.make_snapshot(host), catalog["INT4"])
    with pytest.raises(services.ChangeRefused) as refused:
        services.change_request_approve(
            change=change,
            approver=approver,
            snapshot=f.make_snapshot(host, age=400),
            reason="reviewed the snapshot",
        )
    assert refused.value.code == "stale"
    change.refresh_from_db()
    assert change.status == ChangeStatus.PENDING_APPROVAL


def test_approval_on_a_snapshot_that_differs_marks_the_request_drifted(
    operator, approver, deployment, host, catalog
):
    change = swap(operator, deployment, f.make_snapshot(host, age=20), catalog["INT4"])
    newer = f.make_snapshot(host, parsed=f.parsed_state(main_pid=777))
    services.change_request_approve(
        change=change, approver=approver, snapshot=newer, reason="reviewed the snapshot"
    )
    change.refresh_from_db()
    assert change.status == ChangeStatus.DRIFTED
    assert {"field": f"{f.UNIT}.main_pid", "before": 41003, "after": 777} in change.drift_report
    assert not Approval.objects.exists()
    assert AuditEvent.objects.filter(action="change.drifted", snapshot_id=newer.pk).exists()


def test_a_later_probe_that_differs_voids_the_approval(
    operator, approver, deployment, host, catalog
):
    change = swap(operator, deployment, f.make_snapshot(host), catalog["INT4"])
    services.change_request_approve(
        change=change,
        approver=approver,
        snapshot=f.make_snapshot(host),
        reason="reviewed the snapshot",
    )
    outcome = ProbeOutcome(status="ok", duration_ms=50, parsed=f.parsed_state(main_pid=999))
    host_services.snapshot_record(host=host, outcome=outcome, trigger="schedule", integrity=False)
    change.refresh_from_db()
    approval = change.approvals.get()
    assert approval.voided_at is not None
    assert change.status == ChangeStatus.DRIFTED


def test_rejection_needs_a_reason_and_ends_the_request(
    operator, approver, deployment, host, catalog
):
    change = swap(operator, deployment, f.make_snapshot(host), catalog["INT4"])
    with pytest.raises(services.ChangeRefused, match="needs visible text"):
        services.change_request_reject(change=change, approver=approver, reason=" ")
    services.change_request_reject(change=change, approver=approver, reason="not during launch")
    change.refresh_from_db()
    assert change.status == ChangeStatus.REJECTED
    assert AuditEvent.objects.get(action="change.rejected").data["reason"] == "not during launch"


def test_an_expired_approval_stops_the_job_before_it_touches_the_host(
    operator, approver, deployment, host, catalog, settings
):
    settings.APPROVAL_TTL_SECONDS = 60
    settings.SNAPSHOT_MAX_AGE_SECONDS = 3600
    change = swap(operator, deployment, f.make_snapshot(host), catalog["INT4"])
    services.change_request_approve(
        change=change,
        approver=approver,
        snapshot=f.make_snapshot(host),
        reason="reviewed the snapshot",
    )
    approval = change.approvals.get()
    with time_machine.travel(dt.timedelta(seconds=120)):
        runner.change_execute(change_id=change.pk)
    change.refresh_from_db()
    assert change.status == ChangeStatus.FAILED
    expired_at = approval.expires_at.isoformat(timespec="seconds")
    assert change.status_reason == (
        f"no valid approval: the approval by {approver.username} expired at {expired_at}, "
        "60 s after it was given"
    )
    assert not HostLease.objects.filter(host=host, holder__isnull=False).exists()
    assert [s.name for s in change.steps.all()] == [
        "check the snapshot is still fresh",
        "check the approval",
    ]
    assert change.steps.get(name="check the approval").output == change.status_reason
    event = AuditEvent.objects.get(action="change.failed", target_id=str(change.pk))
    assert event.data["reason"] == change.status_reason
    assert event.data["approval"] == {
        "id": approval.pk,
        "lapse": "expired",
        "approver": approver.username,
        "expires_at": approval.expires_at.isoformat(),
        "voided_at": None,
    }


def test_a_snapshot_gone_stale_by_execution_start_stops_the_job(
    operator, deployment, host, settings
):
    change = restart(operator, deployment, f.make_snapshot(host))
    with time_machine.travel(dt.timedelta(seconds=settings.SNAPSHOT_MAX_AGE_SECONDS + 5)):
        runner.change_execute(change_id=change.pk)
    change.refresh_from_db()
    assert change.status == ChangeStatus.FAILED
    assert change.status_reason.startswith("refused at execution start")
    assert AuditEvent.objects.filter(action="change.failed", target_id=str(change.pk)).exists()


def test_parameters_changed_after_the_request_cannot_be_approved(
    operator, approver, deployment, host, catalog
):
    change = swap(operator, deployment, f.make_snapshot(host), catalog["INT4"])
    # Edited behind the service's back: the unit the approver would be approving is another.
    ChangeRequest.objects.filter(pk=change.pk).update(params={"benchmark": True})
    with pytest.raises(services.ChangeRefused, match="parameters changed after it was made"):
        services.change_request_approve(
            change=change, approver=approver, snapshot=f.make_snapshot(host), reason="fits"
        )
    assert not Approval.objects.exists()


def test_parameters_changed_after_the_approval_stop_the_job(
    operator, approver, deployment, host, catalog
):
    change = swap(operator, deployment, f.make_snapshot(host), catalog["INT4"])
    services.change_request_approve(
        change=change, approver=approver, snapshot=f.make_snapshot(host), reason="fits"
    )
    ChangeRequest.objects.filter(pk=change.pk).update(params={"benchmark": True})
    runner.change_execute(change_id=change.pk)
    change.refresh_from_db()
    assert change.status == ChangeStatus.FAILED
    assert change.status_reason == "the parameters changed after approval"
    assert not HostLease.objects.filter(host=host, holder__isnull=False).exists()


def test_a_voided_approval_does_not_let_the_job_run(operator, approver, deployment, host, catalog):
    change = swap(operator, deployment, f.make_snapshot(host), catalog["INT4"])
    services.change_request_approve(
        change=change, approver=approver, snapshot=f.make_snapshot(host), reason="fits"
    )
    voided_at = timezone.now()
    Approval.objects.filter(change=change).update(
        voided_at=voided_at, void_reason="snapshot #7 differs materially from what the approver saw"
    )
    runner.change_execute(change_id=change.pk)
    change.refresh_from_db()
    assert change.status == ChangeStatus.FAILED
    assert change.status_reason == (
        f"no valid approval: the approval by {approver.username} was voided: "
        "snapshot #7 differs materially from what the approver saw"
    )
    assert not HostLease.objects.filter(host=host, holder__isnull=False).exists()
    event = AuditEvent.objects.get(action="change.failed", target_id=str(change.pk))
    assert event.data["reason"] == change.status_reason
    assert event.data["approval"]["lapse"] == "voided"
    assert event.data["approval"]["voided_at"] == voided_at.isoformat()
    assert event.data["approval"]["void_reason"] == (
        "snapshot #7 differs materially from what the approver saw"
    )


def test_rejections_are_stored_without_an_expiry(operator, approver, deployment, host, catalog):
    change = swap(operator, deployment, f.make_snapshot(host), catalog["INT4"])
    services.change_request_reject(change=change, approver=approver, reason="not during launch")
    rejection = Approval.objects.get(change=change)
    assert rejection.decision == "rejected"
    assert rejection.expires_at is None
    assert not rejection.is_valid(rejection.created_at)


def test_a_job_whose_worker_died_is_marked_interrupted_and_frees_the_host(
    operator, deployment, host, settings
):
    change = restart(operator, deployment, f.make_snapshot(host))
    ChangeRequest.objects.filter(pk=change.pk).update(status=ChangeStatus.RUNNING)
    job = runner.Job(change)
    job.take_lease()
    assert runner.recover_interrupted() == []  # the lease is live
    later = dt.timedelta(seconds=settings.JOB_LEASE_SECONDS + 1)
    with time_machine.travel(later):
        assert runner.recover_interrupted() == [change.pk]
        with pytest.raises(runner.LeaseLost):
            job.fence()  # the old worker, if it wakes up, can no longer act
    change.refresh_from_db()
    assert change.status == ChangeStatus.INTERRUPTED
    lease = HostLease.objects.get(host=host)
    assert lease.holder is None
    assert AuditEvent.objects.filter(action="change.interrupted", target_id=str(change.pk)).exists()


def test_a_superseded_lease_fences_off_the_old_holder(operator, deployment, host, settings):
    change = restart(operator, deployment, f.make_snapshot(host))
    job = runner.Job(change)
    job.take_lease()
    with time_machine.travel(dt.timedelta(seconds=settings.JOB_LEASE_SECONDS + 1)):
        other = runner.Job(change)
        other.take_lease()  # the lease expired, so a new holder takes it with a new token
        assert other.lease.token == job.lease.token + 1
        with pytest.raises(runner.LeaseLost):
            job.fence()
        other.fence()


def test_rollback_without_an_earlier_revision_is_refused(operator, deployment, host):
    with pytest.raises(services.ChangeRefused, match="no earlier revision"):
        services.change_request_create(
            user=operator, deployment=deployment, kind="rollback",
            snapshot=f.make_snapshot(host), reason="go back",
        )  # fmt: skip


def test_a_late_approval_counts_from_the_approvers_snapshot_at_execution(
    operator, approver, deployment, host, catalog, settings
):
    """Requested at t0, approved at t0+250 s on a fresh probe, run at t0+310 s: the request's
    snapshot is 310 s old, but the approval's is 60 s old, and that is what the job rests on."""
    change = swap(operator, deployment, f.make_snapshot(host, age=1), catalog["INT4"])
    with time_machine.travel(dt.timedelta(seconds=250)):
        services.change_request_approve(
            change=change,
            approver=approver,
            snapshot=f.make_snapshot(host, age=1),
            reason="reviewed the snapshot",
        )
    with time_machine.travel(dt.timedelta(seconds=310)):
        runner.change_execute(change_id=change.pk)
    change.refresh_from_db()
    steps = {s.name: s.status for s in change.steps.all()}
    assert steps["check the snapshot is still fresh"] == "succeeded"
    assert steps["check the approval"] == "succeeded"
    # No simulated host listens here, so the job stops at the re-probe, not at freshness.
    assert change.status == ChangeStatus.FAILED
    assert change.status_reason.startswith("could not re-probe")
