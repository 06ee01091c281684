"""Each step of a change job names, in its audit event, the snapshot it rested on, with that
snapshot's age when the step ended: the snapshot the freshness check checked (the approver's,
when there is an approval), then the job's own re-probe, then each snapshot the job takes. Not
the requester's snapshot, minutes old by then, on every row.

The job runs in this process against the simulator over real SSH.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from controlplane.audit.models import AuditEvent
from deployments import services
from deployments.choices import ChangeStatus
from deployments.execution import runner
from deployments.models import ModelArtifact
from hosts import services as host_services
from hosts.models import Host, StateSnapshot

pytestmark = pytest.mark.integration


def probe(host: Host) -> StateSnapshot:
    host = Host.objects.select_related("credential").get(pk=host.pk)
    snapshot = host_services.host_probe(host=host, trigger="manual")
    assert snapshot.status == "ok", snapshot.error
    return snapshot


def test_each_step_names_the_snapshot_it_rested_on(registered_fleet, operator, approver, settings):
    settings.SNAPSHOT_MAX_AGE_SECONDS = 900
    deployment = registered_fleet.deployments[0]
    host = deployment.host
    # The requester decided ten minutes ago, on what the host still looks like now.
    seen = probe(host)
    requested = StateSnapshot.objects.create(
        host=host, taken_at=timezone.now() - dt.timedelta(seconds=600), status=seen.status,
        trigger=seen.trigger, duration_ms=seen.duration_ms, parsed=seen.parsed, digest=seen.digest,
    )  # fmt: skip
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", snapshot=requested,
        reason="INT4 serves more tokens per second",
        model=ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant="INT4"),
    )  # fmt: skip
    # The approver looks at the host now.
    approved = probe(host)
    services.change_request_approve(
        change=change, approver=approver, snapshot=approved, reason="fits, the host is idle"
    )

    runner.change_execute(change_id=change.pk)

    change.refresh_from_db()
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    events = AuditEvent.objects.filter(correlation_id=change.correlation_id, action="change.step")
    rested = {e.data["name"]: (e.snapshot_id, e.snapshot_age_seconds) for e in events}
    fresh, fresh_age = rested["check the snapshot is still fresh"]
    assert fresh == approved.pk and fresh_age < 60
    assert rested["check the approval"][0] == approved.pk
    reprobe, reprobe_age = rested["re-probe and compare with the decided snapshot"]
    assert reprobe == change.before_snapshot_id and reprobe_age < 60
    assert rested["systemctl restart"][0] == change.before_snapshot_id
    assert rested["post-change snapshot"][0] == change.after_snapshot_id
    # Nothing the job did rested on the requester's snapshot, ten minutes old.
    assert requested.pk not in {snapshot for snapshot, _ in rested.values()}
    assert all(age < 120 for _, age in rested.values())
    # The step itself says which snapshot it checked and how old it was then.
    checked = change.steps.get(name="check the snapshot is still fresh")
    assert checked.output.startswith(f"snapshot #{approved.pk}, the approver's ")
    assert "s old; the limit is 900 s" in checked.output
    compared = change.steps.get(name="re-probe and compare with the decided snapshot")
    assert compared.output == (
        f"snapshot #{change.before_snapshot_id} (ok): nothing material differs from snapshot "
        f"#{approved.pk}"
    )
