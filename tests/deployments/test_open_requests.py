"""One open request per deployment, and revision numbers only for what reached the host: a
resubmitted swap is refused naming the open one, and a swap that never ran mints no revision
the revisions page would call served."""

from __future__ import annotations

import pytest

from deployments import revisions, services
from deployments.choices import ChangeStatus
from deployments.evaluation.comparison import revision_comparison
from deployments.models import ChangeRequest
from tests import factories as f

pytestmark = pytest.mark.django_db


def swap(operator, deployment, model, reason="INT4 is faster"):
    return services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap",
        snapshot=f.make_snapshot(deployment.host), reason=reason, model=model,
    )  # fmt: skip


def test_a_second_request_on_a_deployment_is_refused_naming_the_open_one(
    operator, deployment, catalog
):
    first = swap(operator, deployment, catalog["INT4"])
    assert first.status == ChangeStatus.PENDING_APPROVAL
    with pytest.raises(services.ChangeRefused) as refused:
        swap(operator, deployment, catalog["INT4"], reason="resubmitted from the back button")
    assert refused.value.code == "conflict"
    assert f"change #{first.pk}" in refused.value.message
    with pytest.raises(services.ChangeRefused):
        services.change_request_create(
            user=operator, deployment=deployment, kind="restart",
            snapshot=f.make_snapshot(deployment.host), reason="restart meanwhile",
        )  # fmt: skip
    assert ChangeRequest.objects.count() == 1


def test_a_request_is_possible_again_once_the_open_one_ended(
    operator, approver, deployment, catalog
):
    first = swap(operator, deployment, catalog["INT4"])
    services.change_request_reject(change=first, approver=approver, reason="not this week")
    second = swap(operator, deployment, catalog["INT4"], reason="this week after all")
    assert second.status == ChangeStatus.PENDING_APPROVAL


def test_a_requested_revision_has_no_number_until_it_is_written(
    operator, approver, deployment, catalog
):
    rejected = swap(operator, deployment, catalog["INT4"])
    assert rejected.target_revision.number is None
    services.change_request_reject(change=rejected, approver=approver, reason="not this week")
    entries = revision_comparison(deployment).entries
    assert [e.revision.number for e in entries] == [1]  # only the revision that served

    change = swap(operator, deployment, catalog["INT4"], reason="this week after all")
    assert revisions.revision_number_assign(change.target_revision) == 2
    assert revisions.revision_number_assign(change.target_revision) == 2  # given once
    assert [e.revision.number for e in revision_comparison(deployment).entries] == [1, 2]
