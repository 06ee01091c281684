"""Notifications from real actions: services acting on the simulated fleet over SSH, a real
Celery worker on real Redis delivering to a receiver on loopback."""

from __future__ import annotations

import itertools
import logging
import time

import pytest

from controlplane.audit.models import AuditEvent
from controlplane.notifications import services
from controlplane.notifications.models import WebhookDelivery
from deployments import services as change_services
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest, ModelArtifact
from hosts import services as host_services
from hosts.models import Host
from tests.fleet import register
from tests.waiting import wait_for_change

from .conftest import SECRET, broker_down, queued_messages, wait_until_settled

pytestmark = pytest.mark.integration
UNIT = "vllm-kimi-k25.service"


def probe(host):
    host = Host.objects.select_related("credential").get(pk=host.pk)
    return host_services.host_probe(host=host, trigger="manual")


def request_swap(operator, deployment):
    snapshot = probe(deployment.host)
    assert snapshot.status == "ok", snapshot.error
    return change_services.change_request_create(
        user=operator,
        deployment=deployment,
        kind="model_swap",
        snapshot=snapshot,
        reason="INT4 serves more tokens per second",
        model=ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant="INT4"),
    )


def test_a_model_swap_notifies_each_step_once_signed(
    make_fleet, webhook_worker, receiver, make_endpoint, operator, approver
):
    fleet = register(make_fleet(1))
    make_endpoint(receiver.url)
    change = request_swap(operator, fleet.deployments[0])
    (needed,) = receiver.wait_for("approval.needed")
    change_services.change_request_approve(
        change=change, approver=approver, snapshot=probe(change.host), reason="looks fine"
    )
    change = wait_for_change(change)
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    receiver.wait_for("job.finished")
    deliveries = wait_until_settled()

    assert sorted(r.event for r in receiver.received()) == [
        "approval.needed",
        "change.approved",
        "job.finished",
    ]
    assert [(d.status, d.attempts) for d in deliveries] == [("succeeded", 1)] * 3
    for got in receiver.received():
        assert got.signed_by(SECRET), got.event
        body = got.json
        assert body["event"] == got.event
        assert str(body["delivery"]) == got.headers["X-Controlplane-Delivery"]
        assert str(body["timestamp"]) == got.headers["X-Controlplane-Timestamp"]
        assert body["data"]["change"]["id"] == change.pk
        assert body["text"].endswith(f"/changes/{change.pk}/")
    assert needed.json["text"].startswith(
        f"otto requested a model swap of {UNIT} on gpu-01 to moonshotai/Kimi-K2.5 (INT4)"
    )
    (approved,) = receiver.received("change.approved")
    assert approved.json["text"].startswith(f"anna approved change #{change.pk}")
    (finished,) = receiver.received("job.finished")
    assert finished.json["data"]["outcome"] == "succeeded"
    assert finished.json["text"].startswith(
        f"Change #{change.pk} (model swap of {UNIT} on gpu-01, requested by otto) succeeded"
    )
    # The job's own notification was made inside the worker, from its final audit event.
    job_event = AuditEvent.objects.get(action="change.succeeded", target_id=str(change.pk))
    assert finished.json["data"]["audit_seq"] == job_event.seq
    assert job_event.actor == "system:worker"


def test_a_changed_host_key_and_an_unreachable_host_notify_once(
    make_fleet, webhook_worker, receiver, make_endpoint
):
    fleet = register(make_fleet(2))
    make_endpoint(receiver.url, events=["host.key_changed", "host.unreachable"])
    gpu1, gpu2 = (Host.objects.get(name=n) for n in ("gpu-01", "gpu-02"))
    assert probe(gpu1).status == probe(gpu2).status == "ok"
    fleet.set_fault("gpu-01", "host_key_rotated")
    fleet.set_fault("gpu-02", "unreachable")
    for _ in range(3):
        probe(gpu1)
        probe(gpu2)
    (key,) = receiver.wait_for("host.key_changed")
    (down,) = receiver.wait_for("host.unreachable")
    wait_until_settled()
    assert len(receiver.received()) == 2
    assert key.signed_by(SECRET) and down.signed_by(SECRET)
    fingerprint = AuditEvent.objects.get(action="host.key_changed").data["presented_fingerprint"]
    assert key.json["text"].startswith(
        f"gpu-01 presented a different SSH host key ({fingerprint}); every command to it is blocked"
    )
    assert key.json["text"].endswith("/hosts/gpu-01/")
    assert down.json["text"].startswith("gpu-02 is unreachable")
    assert "Its previous probe was ok." in down.json["text"]


def test_a_failing_receiver_gets_retries_and_the_action_is_unaffected(
    make_fleet, webhook_worker, receiver, make_endpoint, operator
):
    fleet = register(make_fleet(1))
    make_endpoint(receiver.url, events=["approval.needed"])
    receiver.answer(500, 503)
    change = request_swap(operator, fleet.deployments[0])
    # The request is committed and waiting, whatever the receiver does.
    assert ChangeRequest.objects.get(pk=change.pk).status == ChangeStatus.PENDING_APPROVAL
    (delivery,) = wait_until_settled()
    assert (delivery.status, delivery.attempts) == ("succeeded", 3)
    attempts = list(delivery.attempt_rows.all())
    assert [(a.number, a.response_code, a.succeeded) for a in attempts] == [
        (1, 500, False),
        (2, 503, False),
        (3, 200, True),
    ]
    got = receiver.received("approval.needed")
    assert [r.headers["X-Controlplane-Attempt"] for r in got] == ["1", "2", "3"]
    assert {r.headers["X-Controlplane-Delivery"] for r in got} == {str(delivery.pk)}
    assert all(r.signed_by(SECRET) for r in got)
    # Backoff: each retry waited at least its configured delay (0.2 s, then 0.4 s).
    gaps = [(b.started_at - a.started_at).total_seconds() for a, b in itertools.pairwise(attempts)]
    assert gaps[0] >= 0.2 and gaps[1] >= 0.4
    assert AuditEvent.objects.filter(action="change.requested", target_id=str(change.pk)).exists()


def test_a_receiver_that_never_recovers_ends_failed_with_every_attempt_recorded(
    make_fleet, webhook_worker, receiver, make_endpoint, operator
):
    fleet = register(make_fleet(1))
    make_endpoint(receiver.url, events=["approval.needed"])
    receiver.default_status = 500
    change = request_swap(operator, fleet.deployments[0])
    (delivery,) = wait_until_settled()
    assert (delivery.status, delivery.attempts, delivery.last_response_code) == ("failed", 5, 500)
    assert delivery.attempt_rows.count() == 5 == len(receiver.received())
    assert ChangeRequest.objects.get(pk=change.pk).status == ChangeStatus.PENDING_APPROVAL


def test_without_a_worker_the_action_succeeds_and_the_delivery_waits(
    make_fleet, transactional_db, receiver, make_endpoint, operator, webhook_queue
):
    fleet = register(make_fleet(1))
    make_endpoint(receiver.url, events=["approval.needed"])
    change = request_swap(operator, fleet.deployments[0])
    assert ChangeRequest.objects.get(pk=change.pk).status == ChangeStatus.PENDING_APPROVAL
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("pending", 0)
    assert queued_messages(webhook_queue) == 1  # queued, for whenever a worker comes
    assert receiver.received() == []


def test_with_the_broker_down_the_action_succeeds_and_the_sweep_delivers_later(
    make_fleet, webhook_worker, receiver, make_endpoint, operator, settings, caplog
):
    fleet = register(make_fleet(1))
    make_endpoint(receiver.url, events=["approval.needed"])
    snapshot = probe(fleet.deployments[0].host)
    with broker_down(), caplog.at_level(logging.WARNING):
        started = time.monotonic()
        change = change_services.change_request_create(
            user=operator,
            deployment=fleet.deployments[0],
            kind="model_swap",
            snapshot=snapshot,
            reason="while Redis is down",
            model=ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant="INT4"),
        )
        took = time.monotonic() - started
    assert ChangeRequest.objects.get(pk=change.pk).status == ChangeStatus.PENDING_APPROVAL
    assert took < 5, f"the broker being down held the action up for {took:.1f} s"
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("pending", 0)
    assert "not queued" in caplog.text and "stay pending" in caplog.text
    assert receiver.received() == []
    # The broker is back; beat's sweep finds the delivery that waited too long.
    settings.WEBHOOK_REQUEUE_AFTER_SECONDS = 0
    assert services.deliveries_requeue() == [delivery.pk]
    (got,) = receiver.wait_for("approval.needed")
    assert got.signed_by(SECRET)
    (delivery,) = wait_until_settled()
    assert (delivery.status, delivery.attempts) == ("succeeded", 1)
