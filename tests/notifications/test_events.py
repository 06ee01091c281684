"""Which audit events notify, and what each notification says."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.audit import services as audit
from controlplane.audit.models import AuditEvent
from controlplane.notifications.events import Notification, might_notify, notifications_for
from deployments import services as change_services
from hosts.models import StateSnapshot
from hosts.state import snapshot_digest
from tests import factories as f

pytestmark = pytest.mark.django_db
UNIT = "vllm-kimi-k25.service"


@pytest.fixture
def catalog():
    return f.make_catalog()


@pytest.fixture
def deployment(catalog):
    return f.make_deployment(f.make_host("gpu-01"), catalog["NVFP4"])


def last(action: str) -> AuditEvent:
    return AuditEvent.objects.filter(action=action).order_by("-seq").first()


def swap(operator, deployment, catalog):
    return change_services.change_request_create(
        user=operator,
        deployment=deployment,
        kind="model_swap",
        snapshot=f.make_snapshot(deployment.host),
        reason="INT4 serves more tokens per second",
        model=catalog["INT4"],
    )


def only(notes: list[Notification]) -> Notification:
    assert len(notes) == 1, notes
    return notes[0]


def test_a_request_that_needs_approval_says_who_what_where(operator, deployment, catalog):
    change = swap(operator, deployment, catalog)
    note = only(notifications_for(last("change.requested")))
    assert note.event_type == "approval.needed"
    assert note.text == (
        f"otto requested a model swap of {UNIT} on gpu-01 to moonshotai/Kimi-K2.5 (INT4); it "
        f"needs approval by a second person (change #{change.pk}). "
        "Reason: INT4 serves more tokens per second"
    )
    payload = note.payload()
    assert payload["event"] == "approval.needed"
    assert payload["text"].endswith(f" /changes/{change.pk}/")
    assert payload["data"]["change"] == {
        "id": change.pk,
        "kind": "model_swap",
        "status": "pending_approval",
        "unit": UNIT,
        "requested_by": "otto",
        "reason": "INT4 serves more tokens per second",
        "from_model": "moonshotai/Kimi-K2.5 (NVFP4)",
        "to_model": "moonshotai/Kimi-K2.5 (INT4)",
    }
    assert payload["data"]["host"] == "gpu-01" and payload["data"]["actor"] == "otto"
    assert payload["blocks"][0]["type"] == "section"


def test_a_request_without_approval_does_not_notify(operator, deployment):
    change_services.change_request_create(
        user=operator,
        deployment=deployment,
        kind="restart",
        snapshot=f.make_snapshot(deployment.host),
        reason="patch",
    )
    event = last("change.requested")
    assert not might_notify(event) and notifications_for(event) == []


def test_approval_rejection_and_break_glass(operator, approver, admin_user, deployment, catalog):
    change = swap(operator, deployment, catalog)
    change_services.change_request_approve(
        change=change,
        approver=approver,
        snapshot=f.make_snapshot(deployment.host),
        reason="reviewed the snapshot",
    )
    note = only(notifications_for(last("change.approved")))
    assert note.event_type == "change.approved"
    assert note.text.startswith(
        f"anna approved change #{change.pk} (model swap of {UNIT} on gpu-01); it is queued"
    )

    other = f.make_deployment(f.make_host("gpu-02", port=2202), catalog["NVFP4"])
    rejected = swap(operator, other, catalog)
    change_services.change_request_reject(change=rejected, approver=approver, reason="not today")
    note = only(notifications_for(last("change.rejected")))
    assert note.event_type == "change.rejected"
    assert note.text == (
        f"anna rejected change #{rejected.pk} (model swap of {UNIT} on gpu-02). Reason: not today"
    )

    third = f.make_deployment(f.make_host("gpu-03", port=2203), catalog["NVFP4"])
    glass = swap(operator, third, catalog)
    change_services.change_request_break_glass(
        change=glass,
        admin=admin_user,
        snapshot=f.make_snapshot(third.host),
        reason="outage: the approver is asleep",
    )
    note = only(notifications_for(last("change.break_glass")))
    assert note.event_type == "change.approved"
    assert "by break-glass, without a second person" in note.text
    assert "Reason: outage: the approver is asleep" in note.text


@pytest.mark.parametrize(
    "status", ["succeeded", "failed", "rolled_back", "cancelled", "interrupted"]
)
def test_the_jobs_final_event_notifies_its_outcome(operator, deployment, status):
    change = change_services.change_request_create(
        user=operator,
        deployment=deployment,
        kind="restart",
        snapshot=f.make_snapshot(deployment.host),
        reason="patch",
    )
    audit.record(
        action=f"change.{status}", target=change, host=change.host, data={"reason": "because"}
    )
    note = only(notifications_for(last(f"change.{status}")))
    assert note.event_type == "job.finished"
    assert note.data["outcome"] == status
    label = status.replace("_", " ")
    assert note.text == (
        f"Change #{change.pk} (restart of {UNIT} on gpu-01, requested by otto) {label}: because"
    )


def test_drift_is_a_finished_job_and_a_drift_notification(operator, approver, deployment, catalog):
    change = swap(operator, deployment, catalog)
    moved = f.make_snapshot(deployment.host, parsed=f.parsed_state(main_pid=52000))
    change_services.change_request_approve(
        change=change, approver=approver, snapshot=moved, reason="reviewed the snapshot"
    )
    finished, drift = notifications_for(last("change.drifted"))
    assert (finished.event_type, finished.data["outcome"]) == ("job.finished", "drifted")
    assert drift.event_type == "drift.detected"
    assert drift.text.startswith(f"Drift on gpu-01: change #{change.pk} (model swap of {UNIT}")
    assert f"{UNIT}.main_pid: 41003 → 52000" in drift.text
    assert drift.data["drift"] == [{"field": f"{UNIT}.main_pid", "before": 41003, "after": 52000}]


def test_a_changed_host_key(deployment):
    host = deployment.host
    audit.record(
        action="host.key_changed", target=host, data={"presented_fingerprint": "SHA256:abc"}
    )
    note = only(notifications_for(last("host.key_changed")))
    assert note.event_type == "host.key_changed"
    assert note.text.startswith("gpu-01 presented a different SSH host key (SHA256:abc)")
    assert note.link == "/hosts/gpu-01/"


def _probe_event(host, status: str, error: str = "") -> AuditEvent:
    parsed = f.parsed_state() if status == "ok" else {}
    snapshot = StateSnapshot(
        host=host,
        taken_at=timezone.now(),
        status=status,
        trigger="schedule",
        duration_ms=5,
        parsed=parsed,
        digest=snapshot_digest(parsed),
        error=error,
    )
    snapshot.save()
    return audit.record(
        action="probe.completed",
        target=snapshot,
        host=host,
        snapshot=snapshot,
        data={"status": status, "trigger": "schedule", "duration_ms": 5},
    )


def test_unreachable_notifies_when_a_host_becomes_unreachable_not_on_every_probe(deployment):
    host = deployment.host
    assert notifications_for(_probe_event(host, "ok")) == []
    first = only(notifications_for(_probe_event(host, "unreachable")))
    assert first.event_type == "host.unreachable"
    assert first.text == "gpu-01 is unreachable. Its previous probe was ok."
    assert notifications_for(_probe_event(host, "unreachable")) == []
    assert notifications_for(_probe_event(host, "unreachable")) == []
    assert notifications_for(_probe_event(host, "ok")) == []
    assert only(notifications_for(_probe_event(host, "unreachable"))).event_type == (
        "host.unreachable"
    )


def test_a_host_unreachable_from_its_first_probe_notifies_with_the_error(deployment):
    error = "[Errno 111] Connect call failed ('127.0.0.1', 2201)\nmore detail"
    note = only(notifications_for(_probe_event(deployment.host, "unreachable", error)))
    assert note.text == "gpu-01 is unreachable: [Errno 111] Connect call failed ('127.0.0.1', 2201)"
    assert note.data["previous_status"] is None


@pytest.mark.parametrize(
    "action", ["change.step", "change.started", "auth.login", "probe.completed", "host.created"]
)
def test_everything_else_is_quiet(action):
    event = audit.record(action=action, data={"status": "ok"})
    assert not might_notify(event) and notifications_for(event) == []
