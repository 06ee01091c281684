"""Outgoing webhooks: where notifications go, and every try at getting them there."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import models
from django.utils import timezone

from controlplane import crypto

from .choices import DeliveryStatus, EventType
from .destinations import url_without_credentials

validate_http_url = URLValidator(schemes=["http", "https"])


def validate_event_types(value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError("event types must be a list of names")
    unknown = sorted(set(value) - set(EventType.values))
    if unknown:
        raise ValidationError(f"unknown event types: {', '.join(unknown)}")


def url_for_display(url: str) -> str:
    """The scheme and host of a URL, without credentials, path or query.

    A webhook URL often is a credential itself (Slack's carry their token in the path), so only
    this form goes into the audit log and onto pages everyone with a role can read.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    rest = "…" if (parts.path not in ("", "/") or parts.query) else ""
    return f"{parts.scheme}://{host}/{rest}"


class WebhookEndpoint(models.Model):
    """A receiver of notifications: a URL, the secret that signs each body, the event types it
    subscribes to, and the host groups it hears about (none: every host). The secret is stored
    encrypted and is never rendered back or logged."""

    name = models.CharField(max_length=100, unique=True)
    url = models.URLField(max_length=500, validators=[validate_http_url])
    secret_encrypted = models.TextField(editable=False)
    event_types = models.JSONField(default=list, validators=[validate_event_types])
    active = models.BooleanField(default=True)
    host_groups = models.ManyToManyField(
        "accounts.HostGroup",
        blank=True,
        related_name="webhook_endpoints",
        help_text="Only events about hosts in these groups (and events about no host). "
        "Empty: every host.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def set_secret(self, secret: str) -> None:
        self.secret_encrypted = crypto.encrypt(secret)

    def secret(self) -> str:
        return crypto.decrypt(self.secret_encrypted)

    def subscribes_to(self, event_type: str) -> bool:
        return event_type in (self.event_types or [])

    def hears_about(self, host_group_ids: frozenset[int] | None) -> bool:
        """Whether an event about a host in these groups (None: about no host) is sent here:
        an endpoint limited to host groups hears only of their hosts (and of no host)."""
        limited = {group.pk for group in self.host_groups.all()}
        return not limited or host_group_ids is None or bool(limited & host_group_ids)

    @property
    def url_display(self) -> str:
        return url_for_display(self.url)

    @property
    def url_redacted(self) -> str:
        """The whole URL for administrators, with any user name and password as `***`."""
        return url_without_credentials(self.url)


class WebhookDelivery(models.Model):
    """One notification for one endpoint, from creation until it succeeded or ran out of tries.

    `endpoint_name` is a copy so the row still says where it went after the endpoint is
    deleted. `locked_until` is the claim a worker holds while it sends; a worker that dies
    mid-send simply lets it lapse.
    """

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.SET_NULL, null=True, blank=True, related_name="deliveries"
    )
    endpoint_name = models.CharField(max_length=100)
    event_type = models.CharField(max_length=40)
    audit_seq = models.BigIntegerField(
        null=True, blank=True, help_text="The audit event this notification is about."
    )
    # The host that event names, copied from it (no FK: a delivery outlives its host), so the
    # deliveries page shows a person only those about hosts in their scope in one query.
    host_id = models.BigIntegerField(null=True, blank=True)
    payload = models.JSONField(default=dict)
    status = models.CharField(
        max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    last_response_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    locked_until = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "webhook deliveries"
        ordering = ["-created_at", "-id"]
        constraints = [
            # One notification per endpoint, event type and audit event, however often the
            # signal is heard.
            models.UniqueConstraint(
                fields=["endpoint", "event_type", "audit_seq"],
                condition=models.Q(audit_seq__isnull=False),
                name="delivery_once_per_event",
            ),
        ]
        indexes = [
            # beat's sweep: open deliveries whose attempt is overdue
            models.Index(fields=["status", "next_attempt_at"], name="delivery_open_due"),
            # the deliveries page filtered to one endpoint, newest first
            models.Index(fields=["endpoint", "-created_at"], name="delivery_endpoint_recent"),
            # the deliveries page of a person who sees some hosts only
            models.Index(fields=["host_id", "-created_at"], name="delivery_host_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} to {self.endpoint_name} ({self.status})"

    @property
    def text(self) -> str:
        return str((self.payload or {}).get("text", ""))

    @property
    def payload_json(self) -> str:
        return json.dumps(self.payload, indent=2, ensure_ascii=False)


class WebhookAttempt(models.Model):
    """One HTTP POST of a delivery and what came back."""

    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_rows"
    )
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    timestamp = models.BigIntegerField(help_text="The X-Controlplane-Timestamp it carried.")
    response_code = models.PositiveIntegerField(null=True, blank=True)
    response_excerpt = models.TextField(blank=True)
    error = models.TextField(blank=True)
    succeeded = models.BooleanField()

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [
            models.UniqueConstraint(fields=["delivery", "number"], name="attempt_number"),
        ]

    def __str__(self) -> str:
        outcome = self.response_code or self.error or "?"
        return f"attempt {self.number} of delivery {self.delivery_id}: {outcome}"
