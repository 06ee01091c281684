"""How a job's end is recorded: its outcome first, whatever happens after."""

from __future__ import annotations

import pytest

from deployments import services
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest
from tests import factories as f


@pytest.mark.django_db(transaction=True)
def test_a_verdict_that_cannot_be_updated_does_not_undo_the_jobs_outcome(
    deployment, monkeypatch
) -> None:
    """The outcome commits first; the verdict is decided after it (and by the next probe)."""
    from django.db import OperationalError

    from deployments import runner

    change = ChangeRequest.objects.create(
        host=deployment.host, deployment=deployment, kind="restart",
        snapshot=f.make_snapshot(deployment.host), reason="r", requested_by_name="otto",
        needs_approval=False, params_digest="-", correlation_id="c",
        status=ChangeStatus.RUNNING,
    )  # fmt: skip

    def lost(**kwargs):
        raise OperationalError("deadlock detected")

    monkeypatch.setattr(services, "host_health_update", lost)
    assert runner._end(change, ChangeStatus.SUCCEEDED, "done")
    assert ChangeRequest.objects.get(pk=change.pk).status == ChangeStatus.SUCCEEDED
