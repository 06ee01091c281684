"""When an approval lets its change run (Approval.is_valid, and the same rule in SQL), why it
does not (expired, voided, a rejection), and rejections that never expire."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from deployments import services
from deployments.choices import ApprovalDecision, ApprovalLapse
from deployments.models import Approval
from tests import factories as f

pytestmark = pytest.mark.django_db

TICK = dt.timedelta(microseconds=1)
BEFORE = ("deployments", "0008_served_name_as_engines_take_it")
AFTER = ("deployments", "0009_rejections_never_expire")


def swap(operator, deployment, catalog):
    return services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap",
        snapshot=f.make_snapshot(deployment.host), reason="INT4 build is faster",
        model=catalog["INT4"],
    )  # fmt: skip


def approve(change, approver):
    services.change_request_approve(
        change=change, approver=approver, snapshot=f.make_snapshot(change.host), reason="fits"
    )
    return change.approvals.get()


def reject(change, approver):
    services.change_request_reject(change=change, approver=approver, reason="not this week")
    return change.approvals.get()


def valid_in_sql(approval, now):
    return Approval.objects.valid(now).filter(pk=approval.pk).exists()


def test_a_grant_counts_until_the_instant_it_expires(operator, approver, deployment, catalog):
    approval = approve(swap(operator, deployment, catalog), approver)
    expires = approval.expires_at
    assert approval.is_valid(expires - TICK)
    assert approval.lapse(expires - TICK) is None
    assert valid_in_sql(approval, expires - TICK)
    # Expired exactly at expires_at, not a tick later.
    assert not approval.is_valid(expires)
    assert approval.lapse(expires) == ApprovalLapse.EXPIRED
    assert not valid_in_sql(approval, expires)
    assert approval.change.valid_approval(expires - TICK) == approval
    assert approval.change.valid_approval(expires) is None


def test_a_voided_grant_never_counts(operator, approver, deployment, catalog):
    approval = approve(swap(operator, deployment, catalog), approver)
    early = approval.created_at
    Approval.objects.filter(pk=approval.pk).update(voided_at=early, void_reason="a later probe")
    approval.refresh_from_db()
    assert not approval.is_valid(early)
    assert approval.lapse(early) == ApprovalLapse.VOIDED
    assert not valid_in_sql(approval, early)
    # Voided before it expired: still voided, not expired, after its expiry.
    assert approval.lapse(approval.expires_at + TICK) == ApprovalLapse.VOIDED


def test_a_grant_voided_after_it_expired_is_reported_expired(
    operator, approver, deployment, catalog
):
    approval = approve(swap(operator, deployment, catalog), approver)
    late = approval.expires_at + dt.timedelta(seconds=5)
    Approval.objects.filter(pk=approval.pk).update(voided_at=late, void_reason="a later probe")
    approval.refresh_from_db()
    assert approval.lapse(late) == ApprovalLapse.EXPIRED
    assert not valid_in_sql(approval, late)


def test_a_grant_for_other_parameters_is_void(operator, approver, deployment, catalog):
    approval = approve(swap(operator, deployment, catalog), approver)
    now = approval.created_at
    type(approval.change).objects.filter(pk=approval.change_id).update(params_digest="edited")
    approval = Approval.objects.get(pk=approval.pk)
    assert approval.lapse(now) == ApprovalLapse.VOIDED
    assert not approval.is_valid(now)
    assert not valid_in_sql(approval, now)


def test_a_rejection_never_counts_and_never_expires(operator, approver, deployment, catalog):
    rejection = reject(swap(operator, deployment, catalog), approver)
    assert rejection.decision == ApprovalDecision.REJECTED
    assert rejection.expires_at is None
    rejection.refresh_from_db()
    assert rejection.expires_at is None
    for now in (rejection.created_at - TICK, rejection.created_at, timezone.now()):
        assert rejection.lapse(now) == ApprovalLapse.REJECTED
        assert not rejection.is_valid(now)
        assert not valid_in_sql(rejection, now)
    assert not Approval.objects.grants().filter(pk=rejection.pk).exists()


def test_the_model_and_the_query_agree(operator, approver, catalog):
    """is_valid and ApprovalQuerySet.valid are one rule: checked over every kind of row at
    every instant that matters to it."""
    rows = []
    for i, state in enumerate(("fresh", "voided", "edited", "rejected")):
        deployment = f.make_deployment(f.make_host(f"gpu-{i:02}", port=2201 + i), catalog["NVFP4"])
        change = swap(operator, deployment, catalog)
        if state == "rejected":
            rows.append(reject(change, approver))
            continue
        approval = approve(change, approver)
        if state == "voided":
            Approval.objects.filter(pk=approval.pk).update(voided_at=timezone.now())
        if state == "edited":
            type(change).objects.filter(pk=change.pk).update(params_digest="edited")
        rows.append(approval)
    fresh = rows[0]
    rows = list(Approval.objects.select_related("change"))
    instants = {
        instant
        for a in rows
        if a.expires_at is not None
        for instant in (a.created_at, a.expires_at - TICK, a.expires_at, a.expires_at + TICK)
    }
    for now, approval in itertools.product(sorted(instants), rows):
        assert approval.is_valid(now) == valid_in_sql(approval, now), (approval, now)
    assert [a.pk for a in rows if a.is_valid(fresh.created_at)] == [fresh.pk]


def test_the_database_holds_grants_to_an_expiry_and_rejections_to_none(
    operator, approver, deployment, catalog
):
    change = swap(operator, deployment, catalog)
    rejection = reject(change, approver)
    with pytest.raises(IntegrityError), transaction.atomic():
        Approval.objects.filter(pk=rejection.pk).update(expires_at=timezone.now())
    with pytest.raises(IntegrityError), transaction.atomic():
        Approval.objects.filter(pk=rejection.pk).update(decision=ApprovalDecision.APPROVED)


@pytest.mark.django_db(transaction=True)
def test_the_migration_clears_the_expiry_of_rejections_and_back(operator, approver, catalog):
    rejected = swap(operator, f.make_deployment(f.make_host("gpu-01"), catalog["NVFP4"]), catalog)
    rejection = reject(rejected, approver)
    approved = swap(
        operator, f.make_deployment(f.make_host("gpu-02", port=2202), catalog["NVFP4"]), catalog
    )
    grant = approve(approved, approver)
    executor = MigrationExecutor(connection)
    try:
        # Back to before: a rejection expired when it was made, as it was stored then.
        executor.migrate([BEFORE])
        old = executor.loader.project_state([BEFORE]).apps.get_model("deployments", "Approval")
        assert old.objects.get(pk=rejection.pk).expires_at == rejection.created_at
        assert old.objects.get(pk=grant.pk).expires_at == grant.expires_at
        # And forward: the data step clears it, and leaves the grant's expiry alone.
        executor = MigrationExecutor(connection)
        executor.migrate([AFTER])
        assert Approval.objects.get(pk=rejection.pk).expires_at is None
        assert Approval.objects.get(pk=grant.pk).expires_at == grant.expires_at
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
