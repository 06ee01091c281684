"""Writes about notifications: managing endpoints (audited), creating deliveries from audit
events, and attempting them."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from controlplane.accounts.models import HostGroup
from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from controlplane.crypto import SecretUnavailable

from . import destinations, dispatch, events, selectors, sender, signing
from .choices import OPEN_DELIVERY_STATUSES, PING, DeliveryStatus
from .models import WebhookAttempt, WebhookDelivery, WebhookEndpoint

logger = logging.getLogger(__name__)

# Early ETA deliveries and clock jitter between workers: an attempt this close to due may run.
DUE_SLACK = dt.timedelta(seconds=1)
USER_AGENT = "gpu-controlplane-webhooks/1"


# --- endpoints ---------------------------------------------------------------------------------


def _audit_view(endpoint: WebhookEndpoint) -> dict[str, Any]:
    """What the audit log keeps of an endpoint: never the secret, and not the full URL either
    (it is often a credential itself), but a hash that shows when it changed."""
    return {
        "name": endpoint.name,
        "url": endpoint.url_display,
        "url_sha256": hashlib.sha256(endpoint.url.encode()).hexdigest(),
        "event_types": sorted(endpoint.event_types or []),
        "host_groups": sorted(group.name for group in endpoint.host_groups.all()),
        "active": endpoint.active,
    }


@transaction.atomic
def endpoint_create(
    *,
    actor: Any,
    name: str,
    url: str,
    secret: str,
    event_types: Iterable[str],
    active: bool = True,
    own_hosts: Iterable[str] = (),
    host_groups: Iterable[HostGroup] = (),
) -> WebhookEndpoint:
    """Add an endpoint. Its URL must be a place a webhook may go (destinations.destination_check;
    `own_hosts`: the names the request reached the control plane by), or DestinationRefused.
    With `host_groups`, it hears only of events about their hosts (and about no host)."""
    if not secret:
        raise ValueError("a webhook endpoint needs a secret")
    endpoint = WebhookEndpoint(name=name, url=url, event_types=sorted(event_types), active=active)
    endpoint.set_secret(secret)
    endpoint.full_clean()
    destinations.destination_check(url, own_hosts=own_hosts)
    endpoint.save()
    endpoint.host_groups.set(list(host_groups))
    audit.record(
        action=AuditAction.WEBHOOK_CREATED,
        actor=actor,
        target=endpoint,
        data={"after": _audit_view(endpoint)},
    )
    return endpoint


@transaction.atomic
def endpoint_update(
    *,
    actor: Any,
    endpoint: WebhookEndpoint,
    name: str,
    url: str,
    event_types: Iterable[str],
    active: bool,
    secret: str | None = None,
    own_hosts: Iterable[str] = (),
    host_groups: Iterable[HostGroup] | None = None,
) -> WebhookEndpoint:
    """Change an endpoint; `secret=None` (or empty) keeps the current one, `host_groups=None`
    the groups it is limited to.

    The URL is checked again (DestinationRefused) unless the endpoint stays disabled with the
    URL it had: disabling one that now points somewhere refused always works."""
    locked = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
    before = _audit_view(locked)
    previous_url = locked.url
    locked.name, locked.url, locked.active = name, url, active
    locked.event_types = sorted(event_types)
    if secret:
        locked.set_secret(secret)
    locked.full_clean()
    if destinations.check_needed(url=url, active=active, previous_url=previous_url):
        destinations.destination_check(url, own_hosts=own_hosts)
    locked.save()
    if host_groups is not None:
        locked.host_groups.set(list(host_groups))
    after = _audit_view(locked)
    changed = sorted(k for k in after if before[k] != after[k])
    if secret:
        # Named, never shown: the log says the secret was replaced, not what it is.
        changed.append("secret")
    if changed:
        audit.record(
            action=AuditAction.WEBHOOK_CHANGED,
            actor=actor,
            target=locked,
            data={
                "fields": changed,
                "before": {k: before[k] for k in changed if k in before},
                "after": {k: after[k] for k in changed if k in after},
            },
        )
    return locked


def endpoint_set_active(
    *, actor: Any, endpoint: WebhookEndpoint, active: bool, own_hosts: Iterable[str] = ()
) -> WebhookEndpoint:
    return endpoint_update(
        actor=actor,
        endpoint=endpoint,
        name=endpoint.name,
        url=endpoint.url,
        event_types=endpoint.event_types,
        active=active,
        own_hosts=own_hosts,
    )  # (its host groups stay)


@transaction.atomic
def endpoint_delete(*, actor: Any, endpoint: WebhookEndpoint) -> None:
    """Delete an endpoint; its deliveries stay, under the name they were sent to."""
    locked = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
    audit.record(
        action=AuditAction.WEBHOOK_DELETED,
        actor=actor,
        target=locked,
        data={"before": _audit_view(locked)},
    )
    locked.delete()


def endpoint_send_test(*, actor: Any, endpoint: WebhookEndpoint) -> WebhookDelivery:
    """Queue a `ping` to one endpoint, whatever it subscribes to, to check URL and secret."""
    who = actor.get_username() if hasattr(actor, "get_username") else str(actor)
    note = events.Notification(
        event_type=PING,
        text=f"{who} sent a test notification to {endpoint.name}.",
        link=events.link_to(reverse("notifications:index")),
        data={"actor": who, "at": timezone.now().isoformat()},
    )
    with transaction.atomic():
        delivery = _delivery_create(endpoint=endpoint, note=note, audit_seq=None)
        audit.record(
            action=AuditAction.WEBHOOK_TEST_SENT,
            actor=actor,
            target=endpoint,
            data={"delivery": delivery.pk},
        )
        transaction.on_commit(lambda: deliveries_enqueue(ids=[delivery.pk]))
    return delivery


# --- deliveries --------------------------------------------------------------------------------


def _delivery_create(
    *,
    endpoint: WebhookEndpoint,
    note: events.Notification,
    audit_seq: int | None,
    host_id: int | None = None,
) -> WebhookDelivery:
    now = timezone.now()
    return WebhookDelivery.objects.create(
        endpoint=endpoint,
        endpoint_name=endpoint.name,
        event_type=note.event_type,
        audit_seq=audit_seq,
        host_id=host_id,
        payload=note.payload(),
        created_at=now,
        updated_at=now,
        next_attempt_at=now,
    )


def deliveries_create_for_event(*, event: AuditEvent) -> list[WebhookDelivery]:
    """The deliveries one committed audit event calls for, queued once they are stored.

    Runs after the action's transaction committed, so nothing here can undo or delay the
    action beyond a few queries: sending happens in a worker.
    """
    if not events.might_notify(event):
        return []
    active = WebhookEndpoint.objects.filter(active=True).prefetch_related("host_groups")
    hosts_groups: list[frozenset[int] | None] = [*selectors.event_host_group_ids(event)]
    # An endpoint limited to host groups hears nothing of the hosts outside them: of an event
    # about several hosts (a rollout's), only if it hears about every one.
    endpoints = [
        e
        for e in active
        if e.event_types and all(e.hears_about(groups) for groups in hosts_groups or [None])
    ]
    if not endpoints:
        return []
    created: list[WebhookDelivery] = []
    notes = events.notifications_for(event)
    with transaction.atomic():
        for note in notes:
            for endpoint in endpoints:
                if not endpoint.subscribes_to(note.event_type):
                    continue
                exists = WebhookDelivery.objects.filter(
                    endpoint=endpoint, event_type=note.event_type, audit_seq=event.seq
                ).exists()
                if not exists:
                    created.append(
                        _delivery_create(
                            endpoint=endpoint, note=note, audit_seq=event.seq, host_id=event.host_id
                        )
                    )
        ids = [d.pk for d in created]
        if ids:
            transaction.on_commit(lambda: deliveries_enqueue(ids=ids))
    return created


def deliveries_enqueue(*, ids: list[int]) -> int:
    """Hand deliveries to the broker. A broker that is down is logged, not raised: the rows stay
    pending and beat's sweep (deliveries_requeue) queues them again later."""
    queued = 0
    options: dict[str, Any] = {"queue": settings.WEBHOOK_QUEUE} if settings.WEBHOOK_QUEUE else {}
    for delivery_id in ids:
        try:
            dispatch.send(
                dispatch.DELIVER,
                args=(delivery_id,),
                retry=True,
                retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.2},
                **options,
            )
        except Exception as exc:  # kombu's OperationalError, or anything else the broker says
            logger.warning(
                "webhook deliveries %s not queued (%s: %s); they stay pending for the sweep",
                ids[queued:],
                type(exc).__name__,
                exc,
            )
            break
        queued += 1
    return queued


def _claim(delivery_id: int, now: dt.datetime) -> bool:
    """Take the delivery for one attempt; False if it is finished, not due, or being sent."""
    lease = dt.timedelta(seconds=settings.WEBHOOK_TIMEOUT_SECONDS * 2 + 30)
    return bool(
        WebhookDelivery.objects.filter(
            pk=delivery_id,
            status__in=OPEN_DELIVERY_STATUSES,
            next_attempt_at__lte=now + DUE_SLACK,
        )
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
        .update(locked_until=now + lease)
    )


def _give_up(delivery: WebhookDelivery, reason: str) -> str:
    now = timezone.now()
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        status=DeliveryStatus.FAILED,
        last_error=reason,
        locked_until=None,
        next_attempt_at=None,
        finished_at=now,
        updated_at=now,
    )
    return DeliveryStatus.FAILED


def delivery_attempt(*, delivery_id: int) -> str:
    """Make one attempt at a delivery, if it is due and nobody else is making it.

    Safe to run twice and in any order: the claim is a conditional UPDATE. A failed attempt
    schedules the next one after the configured backoff, until the attempts run out. A URL the
    destination rule refuses now (its name moved inside, say) and a redirect fail the delivery
    at once: trying again would only be refused, or redirected, again.
    """
    now = timezone.now()
    if not _claim(delivery_id, now):
        return "skipped"
    delivery = WebhookDelivery.objects.select_related("endpoint").get(pk=delivery_id)
    endpoint = delivery.endpoint
    if endpoint is None:
        return _give_up(delivery, "the endpoint was deleted before delivery")
    if not endpoint.active:
        return _give_up(delivery, "the endpoint was disabled before delivery")
    try:
        secret = endpoint.secret()
    except SecretUnavailable as exc:
        return _give_up(delivery, str(exc))
    number = delivery.attempts + 1
    timestamp = int(now.timestamp())
    try:
        destination = destinations.destination_check(endpoint.url)
    except destinations.DestinationRefused as exc:
        refused = sender.SendResult(status_code=None, duration_ms=0, error=exc.message)
        return _record_attempt(delivery, number, now, timestamp, refused, final=exc.permanent)
    body = signing.body_bytes(delivery.payload, delivery_id=delivery.pk, timestamp=timestamp)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        signing.EVENT_HEADER: delivery.event_type,
        signing.DELIVERY_HEADER: str(delivery.pk),
        signing.TIMESTAMP_HEADER: str(timestamp),
        signing.ATTEMPT_HEADER: str(number),
        signing.SIGNATURE_HEADER: signing.signature(secret, body),
    }
    result = sender.post(
        destination, endpoint.url, body, headers, timeout=settings.WEBHOOK_TIMEOUT_SECONDS
    )
    return _record_attempt(delivery, number, now, timestamp, result, final=result.redirected)


def _record_attempt(
    delivery: WebhookDelivery,
    number: int,
    started: dt.datetime,
    timestamp: int,
    result: sender.SendResult,
    *,
    final: bool = False,
) -> str:
    """Store one attempt; `final`: a failure that is not retried."""
    delays = settings.WEBHOOK_RETRY_DELAYS
    now = timezone.now()
    fields: dict[str, Any] = {
        "attempts": number,
        "last_response_code": result.status_code,
        "last_error": "" if result.ok else result.error,
        "locked_until": None,
        "updated_at": now,
    }
    delay: float | None = None
    if result.ok:
        fields.update(status=DeliveryStatus.SUCCEEDED, next_attempt_at=None, finished_at=now)
    elif final or number > len(delays):
        fields.update(status=DeliveryStatus.FAILED, next_attempt_at=None, finished_at=now)
    else:
        delay = float(delays[number - 1])
        fields.update(
            status=DeliveryStatus.RETRYING, next_attempt_at=now + dt.timedelta(seconds=delay)
        )
    with transaction.atomic():
        WebhookAttempt.objects.create(
            delivery=delivery,
            number=number,
            started_at=started,
            duration_ms=result.duration_ms,
            timestamp=timestamp,
            response_code=result.status_code,
            response_excerpt=result.excerpt,
            error=result.error,
            succeeded=result.ok,
        )
        WebhookDelivery.objects.filter(pk=delivery.pk).update(**fields)
    if delay is not None:
        _enqueue_retry(delivery.pk, delay)
    return str(fields["status"])


def _enqueue_retry(delivery_id: int, delay: float) -> None:
    options: dict[str, Any] = {"queue": settings.WEBHOOK_QUEUE} if settings.WEBHOOK_QUEUE else {}
    try:
        dispatch.send(dispatch.DELIVER, args=(delivery_id,), countdown=delay, **options)
    except Exception as exc:
        logger.warning(
            "webhook delivery %s: retry not queued (%s); the sweep will", delivery_id, exc
        )


def deliveries_requeue(*, now: dt.datetime | None = None, limit: int = 500) -> list[int]:
    """Queue again the open deliveries whose attempt is overdue by WEBHOOK_REQUEUE_AFTER_SECONDS:
    created while the broker was down, or their message lost with a worker.

    Their due time moves to now, so the next sweep leaves them alone for another interval.
    """
    now = now or timezone.now()
    cutoff = now - dt.timedelta(seconds=settings.WEBHOOK_REQUEUE_AFTER_SECONDS)
    ids = list(
        WebhookDelivery.objects.filter(
            status__in=OPEN_DELIVERY_STATUSES, next_attempt_at__lte=cutoff
        )
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )
    if ids:
        WebhookDelivery.objects.filter(pk__in=ids).update(next_attempt_at=now, updated_at=now)
        deliveries_enqueue(ids=ids)
    return ids
