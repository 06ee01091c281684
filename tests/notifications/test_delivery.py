"""Attempts against a real HTTP receiver on loopback, run in-process: signing, retries with
backoff, giving up, and beat's sweep. (test_end_to_end.py does the same through a worker.)"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json

import pytest
import time_machine
from django.utils import timezone

from controlplane.audit import services as audit
from controlplane.audit.models import AuditEvent
from controlplane.notifications import services, signing
from controlplane.notifications.models import WebhookDelivery
from deployments import services as change_services
from deployments.models import ModelArtifact
from tests import factories as f

from .conftest import SECRET, queued_messages

pytestmark = pytest.mark.django_db


@pytest.fixture
def deployment():
    return f.make_deployment(f.make_host("gpu-01"), f.make_catalog()["NVFP4"])


def key_changed_event(host):
    return audit.record(
        action="host.key_changed", target=host, data={"presented_fingerprint": "SHA256:abc"}
    )


def one_delivery(make_endpoint, receiver, deployment, **kwargs) -> WebhookDelivery:
    make_endpoint(receiver.url, **kwargs)
    (delivery,) = services.deliveries_create_for_event(event=key_changed_event(deployment.host))
    return delivery


def test_an_attempt_posts_a_signed_slack_compatible_body(make_endpoint, receiver, deployment):
    delivery = one_delivery(make_endpoint, receiver, deployment)
    assert services.delivery_attempt(delivery_id=delivery.pk) == "succeeded"
    (got,) = receiver.received()
    assert got.path == "/hooks/controlplane"
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["X-Controlplane-Event"] == "host.key_changed"
    assert got.headers["X-Controlplane-Delivery"] == str(delivery.pk)
    assert got.headers["X-Controlplane-Attempt"] == "1"
    assert got.signed_by(SECRET)
    assert not got.signed_by(SECRET + "x")
    body = got.json
    assert body["event"] == "host.key_changed" and body["delivery"] == delivery.pk
    assert body["timestamp"] == int(got.headers["X-Controlplane-Timestamp"])
    assert abs(body["timestamp"] - timezone.now().timestamp()) < 5
    assert body["text"].startswith("gpu-01 presented a different SSH host key (SHA256:abc)")
    assert body["text"].endswith("/hosts/gpu-01/")
    assert body["blocks"][0]["text"]["type"] == "mrkdwn"
    assert body["data"]["host"] == "gpu-01"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_response_code) == (
        "succeeded",
        1,
        200,
    )
    (attempt,) = delivery.attempt_rows.all()
    assert (attempt.number, attempt.response_code, attempt.succeeded) == (1, 200, True)
    assert attempt.response_excerpt == "ok" and attempt.timestamp == body["timestamp"]


def test_the_signature_is_hmac_sha256_of_the_exact_body():
    body = signing.body_bytes({"text": "hi", "event": "ping"}, delivery_id=7, timestamp=1700000000)
    assert json.loads(body) == {
        "text": "hi",
        "event": "ping",
        "delivery": 7,
        "timestamp": 1700000000,
    }
    expected = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert signing.signature(SECRET, body) == f"sha256={expected}"
    assert signing.signature_valid(SECRET, body, f"sha256={expected}")
    assert not signing.signature_valid(SECRET, body + b" ", f"sha256={expected}")
    assert not signing.signature_valid(SECRET, body, "")


def test_a_failing_receiver_gets_retries_with_backoff_until_the_attempts_run_out(
    make_endpoint, receiver, deployment, settings, webhook_queue
):
    settings.WEBHOOK_RETRY_DELAYS = [10, 30, 90, 270]
    receiver.default_status = 500
    delivery = one_delivery(make_endpoint, receiver, deployment)
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        assert services.delivery_attempt(delivery_id=delivery.pk) == "retrying"
        delivery.refresh_from_db()
        assert delivery.next_attempt_at == start + dt.timedelta(seconds=10)
        assert delivery.last_response_code == 500
        assert delivery.last_error == "HTTP 500 Internal Server Error"
        assert queued_messages(webhook_queue) == 1  # the retry, with a countdown
        # Too early: a duplicate message (or the sweep) does not send before the backoff.
        assert services.delivery_attempt(delivery_id=delivery.pk) == "skipped"
        for delay, outcome in ((10, "retrying"), (30, "retrying"), (90, "retrying")):
            clock.shift(delay)
            assert services.delivery_attempt(delivery_id=delivery.pk) == outcome
        clock.shift(270)
        assert services.delivery_attempt(delivery_id=delivery.pk) == "failed"
        clock.shift(3600)
        assert services.delivery_attempt(delivery_id=delivery.pk) == "skipped"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("failed", 5, None)
    assert [a.response_code for a in delivery.attempt_rows.all()] == [500] * 5
    assert [r.headers["X-Controlplane-Attempt"] for r in receiver.received()] == list("12345")
    assert all(r.signed_by(SECRET) for r in receiver.received())


def test_a_receiver_that_recovers_ends_succeeded(make_endpoint, receiver, deployment):
    receiver.answer(503)
    delivery = one_delivery(make_endpoint, receiver, deployment)
    assert services.delivery_attempt(delivery_id=delivery.pk) == "retrying"
    with time_machine.travel(timezone.now() + dt.timedelta(seconds=1), tick=False):
        assert services.delivery_attempt(delivery_id=delivery.pk) == "succeeded"
    assert [a.response_code for a in delivery.attempt_rows.all()] == [503, 200]


def test_nobody_listening_and_a_slow_receiver_are_recorded_errors(
    make_endpoint, receiver, deployment, settings
):
    settings.WEBHOOK_TIMEOUT_SECONDS = 0.3
    delivery = one_delivery(make_endpoint, receiver, deployment)
    delivery.endpoint.url = "http://127.0.0.1:9/nothing-here"
    delivery.endpoint.save()
    assert services.delivery_attempt(delivery_id=delivery.pk) == "retrying"
    delivery.refresh_from_db()
    assert "refused" in delivery.last_error.lower() and delivery.last_response_code is None

    delivery.endpoint.url = receiver.url
    delivery.endpoint.save()
    receiver.answer(200, delay=1.0)
    with time_machine.travel(timezone.now() + dt.timedelta(seconds=1), tick=False):
        assert services.delivery_attempt(delivery_id=delivery.pk) == "retrying"
    delivery.refresh_from_db()
    assert delivery.last_error == "timed out"
    assert [a.error for a in delivery.attempt_rows.all()][1] == "timed out"


# Redirects: test_destinations.py (not followed, and the delivery fails at once).


def test_an_endpoint_deleted_or_disabled_before_sending_ends_the_delivery(
    make_endpoint, receiver, deployment, admin_user
):
    endpoint = make_endpoint(receiver.url)
    first, second = (
        services.deliveries_create_for_event(event=key_changed_event(deployment.host))[0]
        for _ in range(2)
    )
    services.endpoint_set_active(actor=admin_user, endpoint=endpoint, active=False)
    assert services.delivery_attempt(delivery_id=first.pk) == "failed"
    services.endpoint_delete(actor=admin_user, endpoint=endpoint)
    assert services.delivery_attempt(delivery_id=second.pk) == "failed"
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.last_error == "the endpoint was disabled before delivery"
    assert second.last_error == "the endpoint was deleted before delivery"
    assert second.endpoint is None and second.endpoint_name == "ops-slack"
    assert receiver.received() == []


def test_only_active_subscribed_endpoints_get_a_delivery_once_per_event(
    make_endpoint, receiver, deployment, admin_user
):
    make_endpoint(receiver.url, name="keys", events=["host.key_changed"])
    make_endpoint(receiver.url, name="approvals", events=["approval.needed"])
    off = make_endpoint(receiver.url, name="off")
    services.endpoint_set_active(actor=admin_user, endpoint=off, active=False)
    event = key_changed_event(deployment.host)
    created = services.deliveries_create_for_event(event=event)
    assert [d.endpoint_name for d in created] == ["keys"]
    assert services.deliveries_create_for_event(event=event) == []  # heard twice, sent once
    assert WebhookDelivery.objects.count() == 1


def test_a_request_waiting_for_approval_makes_one_delivery(
    make_endpoint, receiver, deployment, operator
):
    make_endpoint(receiver.url)
    change_services.change_request_create(
        user=operator,
        deployment=deployment,
        kind="model_swap",
        snapshot=f.make_snapshot(deployment.host),
        reason="faster",
        model=ModelArtifact.objects.get(variant="INT4"),
    )
    event = AuditEvent.objects.get(action="change.requested")
    (delivery,) = services.deliveries_create_for_event(event=event)
    assert delivery.event_type == "approval.needed" and delivery.audit_seq == event.seq


def test_the_sweep_queues_again_what_waited_too_long(
    make_endpoint, receiver, deployment, settings, webhook_queue
):
    settings.WEBHOOK_REQUEUE_AFTER_SECONDS = 60
    delivery = one_delivery(make_endpoint, receiver, deployment)
    created = delivery.next_attempt_at
    assert services.deliveries_requeue(now=created + dt.timedelta(seconds=30)) == []
    later = created + dt.timedelta(seconds=61)
    assert services.deliveries_requeue(now=later) == [delivery.pk]
    assert queued_messages(webhook_queue) == 1
    # Requeued means due again from now: the next sweep leaves it alone for another interval.
    assert services.deliveries_requeue(now=later + dt.timedelta(seconds=30)) == []
    delivery.refresh_from_db()
    assert delivery.status == "pending" and delivery.next_attempt_at == later
